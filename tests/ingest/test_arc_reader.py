"""ARC reader: well-formed ARCs through warcio, broken ones through the lenient fallback.

The broken cases imitate the old Common Crawl ARCs: a filedesc header whose length is off,
records with and without blank lines between them, lengths that do not match the data, and
HTTP headers announcing chunked/gzip bodies that were stored decoded.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from neardup.ingest import extract_page
from neardup.ingest.arc_reader import FILE_HEADER_REASON, iter_arc

FILEDESC_BODY = b"1 0 InternetArchive\nURL IP-address Archive-date Content-type Archive-length\n"
PAGE = b"<html><head><title>Old page</title></head><body><p>Text of %d</p></body></html>"


def arc_line(url: str, length: int, mime: str = "text/html", ip: str = "192.0.2.7") -> bytes:
    return f"{url} {ip} 20080509190241 {mime} {length}\n".encode()


def arc_record(url: str, block: bytes, mime: str = "text/html", length: int | None = None) -> bytes:
    """Header line, block, and the blank line that ends a well-formed record."""
    size = len(block) if length is None else length
    return arc_line(url, size, mime) + block + b"\n"


def http_block(body: bytes, *headers: str, status: str = "200 OK") -> bytes:
    lines = "".join(f"{h}\r\n" for h in headers)
    return f"HTTP/1.1 {status}\r\n{lines}\r\n".encode() + body


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n0\r\n\r\n" % (len(data), data)


def well_formed_records() -> list[bytes]:
    """filedesc, a dns record, three HTML pages (one chunked+gzip), a redirect."""
    return [
        arc_record("filedesc://test.arc", FILEDESC_BODY, mime="text/plain").replace(
            b"192.0.2.7", b"0.0.0.0"
        ),
        arc_record(
            "dns:example.com", b"20080509190241\nexample.com. 300 IN A 192.0.2.7\n", mime="text/dns"
        ),
        arc_record("http://example.com/1", http_block(PAGE % 1, "Content-Type: text/html")),
        arc_record(
            "http://example.com/2",
            http_block(
                chunk(gzip.compress(PAGE % 2)),
                "Content-Type: text/html; charset=utf-8",
                "Transfer-Encoding: chunked",
                "Content-Encoding: gzip",
            ),
        ),
        arc_record(
            "http://example.com/3",
            http_block(
                PAGE % 3,
                "Content-Type:text/html",
                "Transfer-Encoding:chunked",
                "Content-Encoding:gzip",
            ),
        ),
        arc_record(
            "http://example.com/old",
            http_block(b"", "Location: /new", status="302 Found"),
        ),
    ]


def write(path: Path, records: list[bytes], gz: bool) -> list[int]:
    """Write records (one gzip member each if `gz`); returns their offsets."""
    offsets = []
    out = bytearray()
    for rec in records:
        offsets.append(len(out))
        out += gzip.compress(rec) if gz else rec
    path.write_bytes(bytes(out))
    return offsets


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_well_formed_arc(tmp_path: Path, gz: bool, capfd: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / ("a.arc.gz" if gz else "a.arc")
    offsets = write(path, well_formed_records(), gz)
    records = list(iter_arc(str(path)))
    assert [r.offset for r in records] == offsets
    # gzip: a record is its member; plain: the blank line after a record is not part of it
    separators = 0 if gz else len(records)
    assert sum(r.length or 0 for r in records) + separators == path.stat().st_size
    assert records[0].skipped_reason == FILE_HEADER_REASON
    assert records[1].skipped_reason == "not a page: dns record"
    pages = records[2:5]
    for number, rec in enumerate(pages, 1):
        assert rec.skipped_reason is None
        assert rec.payload == PAGE % number
        assert rec.status == 200 and rec.content_type == "text/html"
        assert rec.ip == "192.0.2.7" and rec.fetched_at == "2008-05-09T19:02:41Z"
        assert rec.record_type == "arc"
        assert extract_page(rec).title == "Old page"
    assert records[5].status == 302
    assert records[5].redirect_to == "http://example.com/new"
    assert capfd.readouterr().err == ""  # warcio's framing warnings stay quiet


def old_common_crawl_records() -> list[bytes]:
    """The 2008 Common Crawl layout that warcio rejects."""
    header = arc_line("filedesc://cc.arc.gz", len(FILEDESC_BODY) + 1, "text/plain", "0.0.0.0")
    records = [header + FILEDESC_BODY + b"\n"]  # length counts the blank line: no separator
    for number in range(1, 5):
        block = http_block(PAGE % number, "Content-Type:text/html", "Transfer-Encoding:chunked")
        separator = b"\n" if number % 2 else b""  # some records have no blank line after them
        records.append(arc_line(f"http://cc.example/{number}", len(block)) + block + separator)
    records.append(b"\n\n")  # stray blank lines at the end
    return records


def test_old_common_crawl_layout_is_recovered(tmp_path: Path) -> None:
    path = tmp_path / "cc.arc"
    offsets = write(path, old_common_crawl_records(), gz=False)
    records = list(iter_arc(str(path)))
    assert [r.offset for r in records] == offsets[:-1]
    assert records[0].skipped_reason == FILE_HEADER_REASON
    assert [r.payload for r in records[1:]] == [PAGE % n for n in range(1, 5)]
    assert all(r.url == f"http://cc.example/{n}" for n, r in enumerate(records[1:], 1))


@pytest.mark.parametrize("delta", [-7, +9], ids=["too-short", "too-long"])
def test_wrong_length_resyncs_on_the_next_header(tmp_path: Path, delta: int) -> None:
    recs = well_formed_records()
    block = http_block(PAGE % 9, "Content-Type: text/html")
    recs[3] = arc_record("http://example.com/2", block, length=len(block) + delta)
    path = tmp_path / "bad-length.arc"
    offsets = write(path, recs, gz=False)
    records = list(iter_arc(str(path)))
    assert [r.offset for r in records] == offsets
    assert records[3].payload is not None and records[3].payload.startswith(b"<html>")
    assert records[4].payload == PAGE % 3


def test_junk_between_records_is_reported(tmp_path: Path) -> None:
    recs = well_formed_records()
    recs.insert(3, b"this line is no ARC header\nnor is this one\n")
    path = tmp_path / "junk.arc"
    offsets = write(path, recs, gz=False)
    records = list(iter_arc(str(path)))
    assert [r.offset for r in records] == offsets
    assert (records[3].skipped_reason or "").startswith("unreadable record: no ARC header")
    assert records[4].payload == PAGE % 2


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_truncated_last_record(tmp_path: Path, gz: bool) -> None:
    recs = well_formed_records()
    recs[-1] = arc_record("http://example.com/big", http_block(b"x" * 4000))[:300]
    path = tmp_path / ("t.arc.gz" if gz else "t.arc")
    offsets = write(path, recs, gz)
    records = list(iter_arc(str(path)))
    assert [r.offset for r in records] == offsets
    assert "truncated" in (records[-1].skipped_reason or "")
    assert records[2].payload == PAGE % 1


def test_corrupt_gzip_member_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "c.arc.gz"
    offsets = write(path, well_formed_records(), gz=True)
    data = bytearray(path.read_bytes())
    data[offsets[3] + 15 : offsets[3] + 40] = b"\xff" * 25
    path.write_bytes(bytes(data))
    records = list(iter_arc(str(path)))
    assert [r.offset for r in records] == offsets
    assert (records[3].skipped_reason or "").startswith("unreadable record")
    assert records[4].payload == PAGE % 3


def test_missing_file(tmp_path: Path) -> None:
    (rec,) = list(iter_arc(str(tmp_path / "none.arc")))
    assert rec.skipped_reason is not None and rec.skipped_reason.startswith("cannot open")
