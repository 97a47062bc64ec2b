"""The Spark ingest's tasks are the embedded engine's ranges: a file cut into ranges, each
ingested by its own task and shifted afterwards, gives the pages and texts of the file read
whole, ids and line numbers included. No Spark needed: these are the functions the driver
and the tasks run."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from neardup.config import Settings
from neardup.ingest.input_ranges import RANGE_BYTES_VARIABLE, InputRange, plan_ranges, range_bytes
from neardup.ingest.readers import expand_inputs
from neardup.pipeline.executors.spark.ingest import ingest_range
from neardup.pipeline.executors.spark.ingest_ranges import (
    RangeCount,
    RangeShift,
    plan_tasks,
    range_shifts,
)
from neardup.pipeline.executors.spark.run_parts import write_pages_part, write_text_parts


def _jsonl(path, n, first=0):
    """`n` pages, a blank line (counted in the line numbers, not a record) every tenth,
    and a page without text (a skipped record) every 97th."""
    with open(path, "w", encoding="utf-8") as out:
        for i in range(first, first + n):
            words = "" if i % 97 == 5 else " ".join(f"w{(i * 7 + j) % 500}" for j in range(60))
            out.write(json.dumps({"url": f"https://site.test/p{i}", "text": words}) + "\n")
            if i % 10 == 3:
                out.write("\n")
    return path


def _publish(ranges, counts, work, staging, settings):
    """The run's parts of every range, as `SparkJobs.publish` has each range's task write
    them; the places the driver computed."""
    places = range_shifts(ranges, counts)
    for place in places:
        write_text_parts(place.range_idx, place.shift, work, staging, settings.num_perm)
        write_pages_part(place, work, staging, settings.min_tokens)
    return places


def _ingest(ranges, work, settings):
    return [ingest_range(i, r, None, settings, None, work)[0] for i, r in enumerate(ranges)]


def test_files_cut_into_ranges_give_the_pages_of_the_whole_files(tmp_path, monkeypatch):
    """Two JSONL files, each cut into several ranges by the driver (`plan_tasks`, the
    splitting rule with a small target): the pages and texts, ranges shifted, are those of
    the two files ingested whole, row for row; a line number of a later range counts the
    lines (blank ones too) of the ranges before it in its file, and starts again at 0 in
    the second file."""
    settings = Settings()
    files = [str(_jsonl(tmp_path / "a.jsonl", 2500)), str(_jsonl(tmp_path / "b.jsonl", 1500, 9000))]
    monkeypatch.setenv(RANGE_BYTES_VARIABLE, str(64 << 10))
    ranges = plan_tasks(None, files)
    assert {r.cut for r in ranges} == {"lines"}
    starts = [r.path for r in ranges if r.first_of_input]
    assert starts == files and len(ranges) >= 6  # both files cut, in input order

    cut = tmp_path / "cut"
    counts = _ingest(ranges, cut / "work", settings)
    places = _publish(ranges, counts, cut / "work", cut / "staging", settings)
    assert any(p.lines_before > counts[i].lines for i, p in enumerate(places))  # counted on

    whole = tmp_path / "whole"
    whole_ranges = [InputRange(f, "jsonl") for f in files]
    whole_counts = _ingest(whole_ranges, whole / "work", settings)
    _publish(whole_ranges, whole_counts, whole / "work", whole / "staging", settings)

    for table in ("pages", "page_text", "sketches"):
        expected = pq.read_table(whole / "staging" / f"{table}.parquet")
        got = pq.read_table(cut / "staging" / f"{table}.parquet")
        assert got.num_rows == expected.num_rows > 0, table
        assert got.equals(expected), table
    pages = pq.read_table(cut / "staging" / "pages.parquet").to_pylist()
    b_first = next(p for p in pages if p["url"] == "https://site.test/p9000")
    assert b_first["record_offset"] == 0  # the second file's lines start again
    last_a = next(p for p in pages if p["url"] == "https://site.test/p2499")
    assert last_a["record_offset"] == 2499 + 250  # its line: the pages and blank lines before
    assert any(p["skipped_reason"] for p in pages)  # skipped records keep their place too


def test_range_shifts_count_ids_across_files_and_lines_within_one():
    """The ids run on across every range; the lines only across the ranges of one file,
    and a file read whole (or a URI's) adds no lines. Counts come back in any order."""
    ranges = [
        InputRange("a.jsonl", "jsonl", 0, 100, "lines"),
        InputRange("a.jsonl", "jsonl", 100, 200, "lines"),
        InputRange("a.jsonl", "jsonl", 200, 300, "lines"),
        InputRange("b.warc.gz", "warc"),
        InputRange("c.jsonl", "jsonl", 0, 50, "lines"),
        InputRange("c.jsonl", "jsonl", 50, 90, "lines"),
    ]
    counts = [
        RangeCount(5, 4, 6),
        RangeCount(0, 10, 12),
        RangeCount(2, 7, 7),
        RangeCount(1, 9, 11),
        RangeCount(4, 3, 5),
        RangeCount(3, 20, 0),
    ]
    assert range_shifts(ranges, counts) == [
        RangeShift(0, 0, 10, 0),
        RangeShift(1, 10, 19, 12),
        RangeShift(2, 19, 26, 23),
        RangeShift(3, 26, 46, 0),
        RangeShift(4, 46, 49, 0),
        RangeShift(5, 49, 53, 5),
    ]
    with pytest.raises(RuntimeError, match="5 ingest counts for 6 ranges"):
        range_shifts(ranges, counts[:5])


def test_spark_takes_the_embedded_engines_ranges_for_as_many_workers_as_cores(
    tmp_path, monkeypatch
):
    """Without a target set, a file too small for 32 MB ranges is still cut for the
    session's cores as the embedded engine cuts it for as many workers (`range_bytes`):
    the same ranges, so both engines' tasks are alike."""
    monkeypatch.delenv(RANGE_BYTES_VARIABLE, raising=False)
    src = str(_jsonl(tmp_path / "a.jsonl", 12_000))  # about 5 MB
    session = SimpleNamespace(sparkContext=SimpleNamespace(defaultParallelism=2))
    ranges = plan_tasks(session, [src])
    items = expand_inputs([src])
    assert ranges == plan_ranges(items, range_bytes(os.path.getsize(src), workers=2))
    assert len(ranges) >= 4 and {r.cut for r in ranges} == {"lines"}
