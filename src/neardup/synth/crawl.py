"""A synthetic multi-host crawl with a stated topology and a ground-truth table.

The crawl is what a detector of mirrors and near-duplicates should untangle, with every
answer known in advance (hosts in `neardup.synth.sites`):

* primary   - a documentation site (one page per corpus document, plus an index) on host A;
* alias     - `www.` + host A serving a few byte-identical pages;
* exact     - a few pages served byte-identically under a second path on host A ("/latest/");
* mirror    - a full mirror on host B: same paths, different site template (boilerplate only);
* stale     - an old copy on host C: older version and date, a share of pages edited at
              stated per-word rates;
* partial   - a mirror on host D under another prefix with a share of pages missing; links to
              the missing pages point back to host A;
* excerpt   - a few pages copied truncated into a blog (low resemblance: must not merge);
* unrelated - other documents on other hosts (one declares ISO-8859-1, one gzip-encodes);
* records to skip: 404 pages, 301 redirects, an image, a stylesheet and revisit records.
  Every response and revisit also gets its request record when written as WARC.

`original` in the truth is the corpus document whose text a page carries: two pages derive
from the same text exactly when their `original` is equal.

This module holds the crawl's parameters; `crawl_builder.py` builds its records and
`demo_crawl.py` writes them to disk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from neardup.synth.crawl_builder import _Builder
from neardup.synth.writers import CrawlRecord


@dataclass
class SyntheticCrawl:
    """Parameters of the synthetic crawl; `build()` makes its records, `truth()` the answers.

    The same parameters (seed included) always give the same records on the same Python
    version (the corpus is the interpreter's own standard library).
    """

    n_docs: int = 250
    seed: int = 0
    n_unrelated: int = 80
    min_words: int = 150  # preferred page length; relaxed when the corpus is too small
    alias_pages: int = 10
    exact_copies: int = 10
    stale_share: float = 0.3
    stale_rates: tuple[float, float, float] = (0.005, 0.005, 0.01)  # insert, delete, substitute
    partial_drop_share: float = 0.4
    excerpts: int = 20
    excerpt_keep: float = 0.5
    n_errors: int = 4
    n_redirects: int = 4
    n_revisits: int = 10
    _records: list[CrawlRecord] | None = field(default=None, init=False, repr=False)
    _topology: dict[str, Any] = field(default_factory=dict, init=False, repr=False)

    def build(self) -> list[CrawlRecord]:
        """The crawl's records in crawl order, each with its `warc_file` (0-2) (cached)."""
        if self._records is None:
            builder = _Builder(self)
            self._records = builder.run()
            self._topology = builder.topology
        return self._records

    def truth(self) -> list[dict[str, Any]]:
        """One row per response/revisit record (request and warcinfo records are not listed)."""
        return [r.truth_row() for r in self.build()]

    def topology(self) -> dict[str, Any]:
        """Hosts, prefixes, versions, and the random choices (edited and missing pages)."""
        self.build()
        return self._topology
