"""The ingest stage reads local JSONL in blocks of lines that its workers parse; its tables
are those of the record-by-record path (the one the Spark engine runs), row for row, with
every line accounted for and document ids in input order across inputs of every kind."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.config import Settings
from neardup.ingest import iter_records, tables
from neardup.ingest.eligibility import rule_of
from neardup.ingest.input_ranges import RANGE_BYTES_VARIABLE
from neardup.pipeline.executors.local import LocalEngine
from neardup.pipeline.steps.ingest import (
    LINKS_SCHEMA,
    PAGE_TEXT_SCHEMA,
    PAGES_RAW_SCHEMA,
    _units,
    batch_task,
)
from neardup.pipeline.steps.ingest_ranges import run_ingest

HTML = "<html><title>T</title><body><p>html row</p><a href='/x'>x</a></body></html>"


def _lines(tag: str, n: int) -> list[bytes]:
    rows = [
        {"url": f"http://{tag}.example/{i}", "text": f"words of page {i} in {tag} été 中文"}
        for i in range(n)
    ]
    lines = [json.dumps(row, ensure_ascii=False).encode() for row in rows]
    lines[3] = b'{"url": "http://bad.example/3", "text": "no end'  # a bad line mid-block
    lines[5] = b""  # blank: no row, but it counts in the line numbers
    lines[6] = json.dumps({"url": f"http://{tag}.example/6", "text": "x", "status": 404}).encode()
    lines[7] = json.dumps({"url": f"http://{tag}.example/7", "text": "y", "status": 301}).encode()
    lines[8] = json.dumps({"url": f"http://{tag}.example/8", "html": HTML}).encode()
    lines[9] = json.dumps({"url": f"http://{tag}.example/9", "text": "w " * 5000}).encode()
    lines[10] = json.dumps({"url": f"http://{tag}.example/10", "text": "lone \ud800"}).encode()
    return lines


@pytest.fixture
def inputs(tmp_path: Path) -> list[str]:
    first = tmp_path / "a.jsonl"
    first.write_bytes(b"\n".join(_lines("a", 60)) + b"\n")
    table = pa.table(
        {
            "url": [f"http://p.example/{i}" for i in range(7)],
            "text": [f"parquet page {i}" for i in range(7)],
        }
    )
    pq.write_table(table, tmp_path / "b.parquet")
    second = tmp_path / "c.jsonl"
    second.write_bytes(b"\n".join(_lines("c", 40)))  # no final newline
    return [str(first), str(tmp_path / "b.parquet"), str(second)]


def _record_path_tables(inputs: list[str], settings: Settings) -> dict[str, pa.Table]:
    """The three tables as the record-by-record path builds them."""
    parts: dict[str, list[pa.RecordBatch]] = {"pages": [], "texts": [], "links": []}
    first = 0
    records = iter_records(inputs, None, settings.max_payload_bytes)
    rule = rule_of(settings)
    for group in _units(records, settings):
        assert isinstance(group, list)
        out = batch_task(group, settings, rule, False, True).shifted(first)
        first += len(group)
        parts["pages"].append(out.pages)
        parts["texts"].append(out.texts)
        parts["links"].append(out.links)
    schemas = {"pages": PAGES_RAW_SCHEMA, "texts": PAGE_TEXT_SCHEMA, "links": LINKS_SCHEMA}
    return {k: pa.Table.from_batches(v, schema=schemas[k]) for k, v in parts.items()}


def _staged(staging: Path) -> dict[str, pa.Table]:
    return {
        "pages": pq.read_table(staging / "pages_raw.parquet"),
        "texts": pq.read_table(staging / "page_text.parquet"),
        "links": pq.read_table(staging / "links.parquet"),
    }


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("include_error_pages", [False, True])
@pytest.mark.parametrize("range_bytes", [None, 900])
def test_blocks_give_the_record_path_tables(
    tmp_path: Path,
    inputs: list[str],
    workers: int,
    include_error_pages: bool,
    range_bytes: int | None,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Whole files, and files cut into ranges that workers read (`input_ranges.py`): the
    same tables, with line numbers counted from each file's start."""
    monkeypatch.setattr(tables, "BLOCK_BYTES", 700)  # many blocks, lines across their edges
    if range_bytes is not None:
        monkeypatch.setenv(RANGE_BYTES_VARIABLE, str(range_bytes))
    settings = Settings(max_payload_bytes=4096, include_error_pages=include_error_pages)
    staging = tmp_path / f"staging-{workers}"
    staging.mkdir()
    with LocalEngine(workers) as engine:
        result = run_ingest(inputs, staging, settings, engine)
    got = _staged(staging)
    want = _record_path_tables(inputs, settings)
    for name in ("pages", "texts", "links"):
        assert got[name].equals(want[name]), name
    pages = got["pages"]
    # Every non-blank line and every Parquet row is a row, numbered in input order.
    assert result.records == pages.num_rows == 59 + 7 + 39
    assert pages.column("doc_id").to_pylist() == list(range(pages.num_rows))
    urls = pages.column("url").to_pylist()
    reasons = dict(zip(urls, pages.column("skipped_reason").to_pylist(), strict=True))
    assert reasons["http://a.example/7"] == "redirect (HTTP 3xx)"
    assert reasons["http://a.example/6"] == (None if include_error_pages else "HTTP status 404")
    assert reasons["http://c.example/9"] == "payload too large (over 4096 bytes)"
    assert reasons["http://c.example/10"] == "bad row: text is not valid UTF-8 (lone surrogate)"
    bad = pages.filter(pa.compute.starts_with(pages.column("skipped_reason"), "bad JSON line"))
    assert bad.column("record_offset").to_pylist() == [3, 3]
    assert "http://a.example/x" in got["links"].column("dst_url").to_pylist()
