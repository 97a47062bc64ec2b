"""Readers and extraction on the real crawl files in ../shared/data/warc (skipped if absent).

For every file: iterating never raises, every record is accounted for (compared with a plain
FastWARC or warcio iteration), files with HTML responses give pages with text, and
extract_page never raises on any record.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from fastwarc.warc import ArchiveIterator as FastIterator
from fastwarc.warc import WarcRecordType
from warcio.archiveiterator import ArchiveIterator as WarcioIterator

from neardup.ingest import detect_input_kind, extract_page, iter_records
from neardup.ingest.extract import HTML_TYPES
from neardup.ingest.record import ExtractedPage, RawRecord

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "warc"
FILES = sorted(p.name for p in DATA.iterdir()) if DATA.is_dir() else []
# The old Common Crawl ARCs that warcio rejects: records recovered by the lenient parser
# (every header line in the files).
LENIENT_ARC_RECORDS = {"copycat-cc-2008-sample0.arc": 146, "copycat-cc-2010-sample8.arc": 9}

pytestmark = pytest.mark.realdata


@pytest.fixture(scope="module")
def results() -> dict[str, tuple[list[RawRecord], list[ExtractedPage]]]:
    """Every file read and extracted once for all tests of this module."""
    if not DATA.is_dir():
        pytest.skip(f"real data not available at {DATA}")
    out = {}
    for name in FILES:
        records = list(iter_records([str(DATA / name)]))
        out[name] = (records, [extract_page(r) for r in records])
    return out


def fastwarc_count(path: Path) -> int:
    iterator = FastIterator(
        str(path), parse_http=False, record_types=WarcRecordType.any_type, quirks_mode=True
    )
    return sum(1 for _ in iterator)


def warcio_count(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in WarcioIterator(fh, arc2warc=True))


@pytest.mark.parametrize("name", FILES)
def test_every_record_accounted_for(results: dict, name: str) -> None:
    records, _ = results[name]
    path = DATA / name
    kind = detect_input_kind(str(path))
    if kind == "warc":
        assert len(records) == fastwarc_count(path)
    elif name in LENIENT_ARC_RECORDS:
        assert len(records) == LENIENT_ARC_RECORDS[name]
    else:
        assert kind == "arc"
        assert len(records) == warcio_count(path)
    offsets = [r.offset for r in records]
    assert len(set(offsets)) == len(offsets), "offsets identify records"
    assert not any("unreadable" in (r.skipped_reason or "") for r in records)


@pytest.mark.parametrize("name", FILES)
def test_html_responses_give_text(results: dict, name: str) -> None:
    records, pages = results[name]
    html_responses = [
        r for r in records if r.content_type in HTML_TYPES and r.payload and r.status in (None, 200)
    ]
    with_text = [p for p in pages if p.format == "html" and p.text and p.text.strip()]
    if html_responses:
        assert len(with_text) > 0.8 * len(html_responses)
    assert all(p.skipped_reason or p.text for p in pages)


def test_known_counts(results: dict) -> None:
    """Figures from the data README and the crawl files themselves."""

    def count(name: str, pred: object) -> int:
        return sum(1 for r in results[name][0] if pred(r))  # type: ignore[operator]

    assert len(results["aut-example.warc.gz"][0]) == 822
    assert count("aut-example.warc.gz", lambda r: r.record_type == "response") == 299
    assert len(results["aut-example.arc.gz"][0]) == 300
    assert count("ukwa-govuk-2.warc.gz", lambda r: r.record_type == "revisit") == 55
    assert count("pywb-iana.warc.gz", lambda r: (r.skipped_reason or "").startswith("revisit"))
    formats = Counter(p.format for p in results["aut-example.pdf.warc.gz"][1] if p.text)
    assert formats["pdf"] >= 1


def test_chunked_capture_decoded(results: dict) -> None:
    (response,) = [r for r in results["warcio-iana-chunked.warc"][0] if r.payload]
    assert response.payload is not None and response.payload.startswith(b"<!doctype html>")
    pages = [p for p in results["warcio-iana-chunked.warc"][1] if p.text]
    assert pages and "Internet Assigned Numbers Authority" in (pages[0].title or "")
