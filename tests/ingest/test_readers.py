"""Input kinds, dispatch over several inputs, and HTML directories."""

from __future__ import annotations

import gzip
import io
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup.ingest import InputError, detect_input_kind, extract_page, iter_records
from neardup.ingest.readers import expand_inputs


def tiny_warc(path: Path, urls: list[str], gz: bool = True) -> None:
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=gz)
    for url in urls:
        http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
        body = io.BytesIO(f"<p>page {url}</p>".encode())
        writer.write_record(
            writer.create_warc_record(url, "response", payload=body, http_headers=http)
        )
    path.write_bytes(buf.getvalue())


def tiny_arc(path: Path) -> None:
    block = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n<p>arc page</p>"
    data = b"filedesc://t.arc 0.0.0.0 20080101000000 text/plain 0\n\n"
    data += b"http://arc.example/ 192.0.2.1 20080101000000 text/html %d\n" % len(block) + block
    path.write_bytes(gzip.compress(data))


def html_tree(root: Path) -> None:
    (root / "sub dir").mkdir(parents=True)
    (root / "index.html").write_text("<title>Home</title><a href='sub%20dir/b.htm'>b</a>")
    (root / "sub dir" / "b.htm").write_text("<p>page b <a href='../index.html'>home</a></p>")
    (root / "sub dir" / "c.HTML").write_text("<p>page c</p>")
    (root / "notes.txt").write_text("not html")


def test_detect_by_content_not_name(tmp_path: Path) -> None:
    warc = tmp_path / "crawl.bin"
    tiny_warc(warc, ["http://w.example/"])
    arc_named_warc = tmp_path / "old.warc.gz"
    tiny_arc(arc_named_warc)
    jsonl = tmp_path / "rows.data.gz"
    jsonl.write_bytes(gzip.compress(b'{"url": "http://j.example/", "text": "t"}\n'))
    parquet = tmp_path / "rows"
    pq.write_table(pa.table({"url": ["u"], "text": ["t"]}), parquet)
    html_tree(tmp_path / "site")
    assert detect_input_kind(str(warc)) == "warc"
    assert detect_input_kind(str(arc_named_warc)) == "arc"
    assert detect_input_kind(str(jsonl)) == "jsonl"
    assert detect_input_kind(str(parquet)) == "parquet"
    assert detect_input_kind(str(tmp_path / "site")) == "html_dir"
    assert detect_input_kind(str(tmp_path / "site" / "index.html")) == "html_dir"


def test_suffix_decides_when_content_says_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty.warc.gz"
    empty.write_bytes(b"")
    assert detect_input_kind(str(empty)) == "warc"
    (rec,) = list(iter_records([str(empty)]))
    assert rec.skipped_reason == "empty file"


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("missing.warc", None, "no such file"),
        ("notes.txt", b"just some notes\n", "unknown input kind"),
        ("emptydir", "dir", "no HTML, WARC, ARC, JSONL or Parquet files"),
        ("*.nothing", None, "pattern matches no files"),
    ],
)
def test_bad_inputs_fail_before_reading(
    tmp_path: Path, name: str, content: bytes | str | None, message: str
) -> None:
    path = tmp_path / name
    if content == "dir":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    good = tmp_path / "good.warc.gz"
    tiny_warc(good, ["http://w.example/"])
    with pytest.raises(InputError, match=message):
        iter_records([str(good), str(path)])  # raises at the call, before any record


def test_inputs_in_order_with_globs_and_archive_dirs(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    tiny_warc(crawl / "b.warc.gz", ["http://w.example/b1", "http://w.example/b2"])
    tiny_warc(crawl / "a.warc", ["http://w.example/a"], gz=False)
    tiny_arc(crawl / "c.arc.gz")
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"url": "http://j.example/", "text": "given"}) + "\n")
    site = tmp_path / "site"
    html_tree(site)
    inputs = [str(rows), str(crawl), str(tmp_path / "crawl" / "*.warc.gz"), str(site)]
    assert [kind for _, kind in expand_inputs(inputs)] == [
        "jsonl",
        "warc",
        "warc",
        "arc",
        "warc",
        "html_dir",
    ]
    records = list(iter_records(inputs, base_url="https://mirror.example/docs/"))
    urls = [r.url for r in records if not r.skipped_reason]
    assert urls == [
        "http://j.example/",
        "http://w.example/a",
        "http://w.example/b1",
        "http://w.example/b2",
        "http://arc.example/",
        "http://w.example/b1",
        "http://w.example/b2",
        "https://mirror.example/docs/index.html",
        "https://mirror.example/docs/sub%20dir/b.htm",
        "https://mirror.example/docs/sub%20dir/c.HTML",
    ]


def test_html_dir_records(tmp_path: Path) -> None:
    site = tmp_path / "site"
    html_tree(site)
    os.utime(site / "index.html", (1_600_000_000, 1_600_000_000))
    records = list(iter_records([str(site)], base_url="http://m.example"))
    assert len(records) == 3
    home = records[0]
    assert home.record_type == "file" and home.content_type == "text/html"
    assert home.source == str(site / "index.html") and home.offset == 0
    assert home.length == (site / "index.html").stat().st_size
    assert home.fetched_at == "2020-09-13T12:26:40Z"
    page = extract_page(home)
    assert page.title == "Home"
    assert page.links == ["http://m.example/sub%20dir/b.htm"]
    assert extract_page(records[1]).links == ["http://m.example/index.html"]


def test_html_dir_without_base_url_uses_file_urls(tmp_path: Path) -> None:
    site = tmp_path / "site"
    html_tree(site)
    records = list(iter_records([str(site)]))
    assert records[0].url == (site / "index.html").resolve().as_uri()
    target = (site / "sub dir" / "b.htm").resolve().as_uri()
    assert extract_page(records[0]).links == [target]


def test_readers_report_the_bytes_they_consume(tmp_path: Path) -> None:
    """The reading bar: `input_bytes` is the size of what `iter_records` reads (an HTML
    folder counts its HTML files), and the bytes reported as records are read add up to it,
    moving within a file (archives by their records' offsets, JSONL by its position)."""
    from neardup.ingest.readers import input_bytes

    warc = tmp_path / "a.warc.gz"
    tiny_warc(warc, [f"http://w.example/{i}" for i in range(50)])
    plain = tmp_path / "b.warc"
    tiny_warc(plain, [f"http://p.example/{i}" for i in range(20)], gz=False)
    rows = "".join(
        json.dumps({"url": f"http://j/{i}", "text": "w " * 40}) + "\n" for i in range(300)
    )
    (tmp_path / "t.jsonl").write_text(rows)
    (tmp_path / "t.jsonl.gz").write_bytes(gzip.compress(rows.encode()))
    html_tree(tmp_path / "site")
    (tmp_path / "site" / "gone.html").symlink_to(tmp_path / "nowhere.html")  # one row, 0 bytes
    arc = tmp_path / "old.arc.gz"
    tiny_arc(arc)
    files = [warc, plain, tmp_path / "t.jsonl", tmp_path / "t.jsonl.gz", arc]
    html = [tmp_path / "site" / "index.html", *(tmp_path / "site" / "sub dir").iterdir()]
    inputs = [str(p) for p in files] + [str(tmp_path / "site")]
    size = sum(p.stat().st_size for p in files + html)
    assert input_bytes(inputs) == size
    read: list[int] = []
    per_file: dict[str, int] = {}
    for rec in iter_records(inputs, on_bytes=read.append):
        per_file[rec.source] = sum(read)
    assert sum(read) == size and all(n > 0 for n in read)
    assert len(read) > len(inputs) + 50  # within files too, not one step per file
    assert 0 < per_file[str(warc)] <= warc.stat().st_size
    assert input_bytes([str(tmp_path / "missing-*.warc")]) is None  # refused by the scan
