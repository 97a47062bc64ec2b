"""JSONL and Parquet inputs: every row becomes one record, bad rows carry a reason."""

from __future__ import annotations

import gzip
import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.ingest import extract_page
from neardup.ingest.tables import iter_jsonl, iter_parquet

ROWS = [
    {"url": "http://a.example/1", "text": "given text one", "id": 7, "status": 200},
    {"url": "http://a.example/2", "html": "<title>T</title><p>html <a href='x'>row</a></p>"},
    {"url": "http://a.example/3"},  # neither text nor html
    {"text": "no url here"},
    {"url": "http://a.example/5", "text": "", "fetched_at": "2024-03-01T10:00:00+01:00"},
]


def write_jsonl(path: Path, lines: list[str], gz: bool = False) -> None:
    data = "".join(line + "\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data) if gz else data)


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_jsonl_rows(tmp_path: Path, gz: bool) -> None:
    lines = [json.dumps(r) for r in ROWS[:2]] + ["{not json", "[1, 2]", ""]
    lines += [json.dumps(r) for r in ROWS[2:]]
    path = tmp_path / ("t.jsonl.gz" if gz else "t.jsonl")
    write_jsonl(path, lines, gz)
    records = list(iter_jsonl(str(path)))
    # One record per non-blank line, offset = line number.
    assert [r.offset for r in records] == [0, 1, 2, 3, 5, 6, 7]
    assert all(r.record_type == "row" and r.length is None for r in records)
    first, second, bad_json, not_object, no_body, no_url, empty = records
    assert first.text == "given text one" and first.record_id == "7" and first.status == 200
    assert second.payload is not None and second.content_type == "text/html"
    assert (bad_json.skipped_reason or "").startswith("bad JSON line")
    assert not_object.skipped_reason == "bad row: not a JSON object"
    assert no_body.skipped_reason == "bad row: no text or html"
    assert no_url.skipped_reason == "bad row: no url"
    assert empty.fetched_at == "2024-03-01T09:00:00Z"
    assert extract_page(first).format == "given"
    page = extract_page(second)
    assert page.format == "html" and page.links == ["http://a.example/x"]
    assert extract_page(empty).skipped_reason == "empty text"


def test_jsonl_truncated_gzip_reports_and_keeps_rows(tmp_path: Path) -> None:
    path = tmp_path / "cut.jsonl.gz"
    full = gzip.compress("".join(json.dumps(ROWS[0]) + "\n" for _ in range(200)).encode())
    path.write_bytes(full[: len(full) - 10])
    records = list(iter_jsonl(str(path)))
    assert records[-1].skipped_reason is not None
    assert records[-1].skipped_reason.startswith("unreadable file")
    assert all(r.text == "given text one" for r in records[:-1])


def test_parquet_rows_in_batches(tmp_path: Path) -> None:
    n = 2500  # more than one batch
    table = pa.table(
        {
            "url": [f"http://p.example/{i}" if i % 500 else None for i in range(n)],
            "text": [f"row {i}" if i % 3 else None for i in range(n)],
            "html": [None if i % 3 else f"<p>html {i}</p>" for i in range(n)],
            "fetched_at": [datetime(2020, 1, 1, tzinfo=timezone.utc)] * n,
            "extra": list(range(n)),
        }
    )
    path = tmp_path / "t.parquet"
    pq.write_table(table, path, row_group_size=700)
    records = list(iter_parquet(str(path)))
    assert [r.offset for r in records] == list(range(n))
    assert records[1].text == "row 1" and records[1].fetched_at == "2020-01-01T00:00:00Z"
    assert records[3].payload == b"<p>html 3</p>" and records[3].content_type == "text/html"
    assert records[500].skipped_reason == "bad row: no url"
    assert sum(1 for r in records if r.skipped_reason) == 5


def test_parquet_without_needed_columns(tmp_path: Path) -> None:
    path = tmp_path / "wrong.parquet"
    pq.write_table(pa.table({"link": ["x"], "body": ["y"]}), path)
    (rec,) = list(iter_parquet(str(path)))
    assert rec.skipped_reason is not None and "url column" in rec.skipped_reason


def test_parquet_unreadable(tmp_path: Path) -> None:
    path = tmp_path / "broken.parquet"
    path.write_bytes(b"PAR1 this is not really parquet")
    (rec,) = list(iter_parquet(str(path)))
    assert rec.skipped_reason is not None and rec.skipped_reason.startswith("unreadable")
