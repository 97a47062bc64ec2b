"""Synthetic, offline, reproducible test and demo data with known near-duplicates.

Text comes from the running interpreter's standard-library docstrings (real technical
English, no download); pages are rendered as realistic multi-host HTML sites; the crawl is
written as WARC, JSONL, Parquet or an HTML folder, with a truth table saying which page
copies which and how it was edited.
"""

from neardup.synth.corpus import Document, Section, stdlib_documents
from neardup.synth.crawl import SyntheticCrawl
from neardup.synth.demo_crawl import DemoCrawl, generate_demo_crawl
from neardup.synth.edits import (
    edit_document,
    expected_jaccard,
    jaccard,
    mutate,
    shingles,
    swap_boilerplate,
    truncate,
    truncate_document,
)
from neardup.synth.html import PageLinks, SiteTemplate, render_page, visible_text
from neardup.synth.writers import (
    CrawlRecord,
    page_rows,
    write_html_dir,
    write_jsonl,
    write_parquet,
    write_warc,
)

__all__ = [
    "CrawlRecord",
    "DemoCrawl",
    "Document",
    "PageLinks",
    "Section",
    "SiteTemplate",
    "SyntheticCrawl",
    "edit_document",
    "expected_jaccard",
    "generate_demo_crawl",
    "jaccard",
    "mutate",
    "page_rows",
    "render_page",
    "shingles",
    "stdlib_documents",
    "swap_boilerplate",
    "truncate",
    "truncate_document",
    "visible_text",
    "write_html_dir",
    "write_jsonl",
    "write_parquet",
    "write_warc",
]
