"""The Spark ingest task's own files: whole or absent, and the run's part files in document
order. No Spark needed: these are the functions the tasks run."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import neardup.pipeline.executors.spark.ingest as spark_ingest
from neardup.config import Settings
from neardup.ingest.input_ranges import InputRange
from neardup.pipeline.executors.spark.ingest import INGEST_TABLES, RANGE_FILE, ingest_range
from neardup.pipeline.executors.spark.ingest_ranges import RANGE_IDX, RangeShift
from neardup.pipeline.executors.spark.run_parts import (
    RUN_PART,
    SIZED,
    SIZED_SCHEMA,
    write_pages_part,
    write_text_parts,
)


def _jsonl(path, n, first=0):
    with open(path, "w", encoding="utf-8") as out:
        for i in range(first, first + n):
            words = " ".join(f"w{(i * 7 + j) % 500}" for j in range(60))
            out.write(json.dumps({"url": f"https://site.test/p{i}", "text": words}) + "\n")
            if i % 10 == 3:
                out.write("\n")  # blank lines are not records
    return path


def ingest_input(idx, path, settings, work):
    """Ingest the whole file `path` as range `idx`: (records, pages with text by format)."""
    count, formats = ingest_range(idx, InputRange(path, "jsonl"), None, settings, None, work)
    return count.records, formats


def test_a_failing_input_leaves_no_file(tmp_path, monkeypatch):
    """A task that fails half-way leaves neither its files nor their temporary copies, so a
    retried task starts clean and a reader never sees half an input."""
    src = _jsonl(tmp_path / "in.jsonl", 20_000)  # several blocks of lines
    calls = {"n": 0}
    real = spark_ingest._extract_task

    def failing(task):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError("disk went away")
        return real(task)

    monkeypatch.setattr(spark_ingest, "_extract_task", failing)
    monkeypatch.setattr(spark_ingest, "RECORD_ROWS", 100)  # row groups written before the failure
    monkeypatch.setattr(spark_ingest, "TEXT_ROWS", 100)
    work = tmp_path / "work"
    with pytest.raises(OSError, match="disk went away"):
        ingest_input(0, str(src), Settings(), work)
    assert calls["n"] == 2
    left = [p for folder in INGEST_TABLES for p in (work / folder).glob("*")]
    assert left == []


def test_run_parts_hold_every_text_row_in_document_order(tmp_path):
    """Two inputs ingested separately (ids from 0 in each), then published with their
    shifts: the part files, read in name order, hold every text row once with the global
    ids, in order, and the sketches beside them."""
    settings = Settings()
    work, staging = tmp_path / "work", tmp_path / "staging"
    counts = []
    for idx, (n, first) in enumerate([(1200, 0), (700, 5000)]):
        src = _jsonl(tmp_path / f"in{idx}.jsonl", n, first)
        records, formats = ingest_input(idx, str(src), settings, work)
        assert sum(formats.values()) == n  # every record has text
        counts.append(records)
    assert counts == [1200, 700]  # one record per non-blank line
    shifts = [0, counts[0]]
    for idx, shift in enumerate(shifts):
        write_text_parts(idx, shift, work, staging, settings.num_perm)
    parts = sorted((staging / "page_text.parquet").glob("*.parquet"))
    assert [p.name for p in parts] == [RUN_PART.format(0), RUN_PART.format(1)]
    ids = [i for p in parts for i in pq.read_table(p).column("doc_id").to_pylist()]
    assert ids == list(range(1900))
    sketch_ids = [
        i
        for p in sorted((staging / "sketches.parquet").glob("*.parquet"))
        for i in pq.read_table(p).column("doc_id").to_pylist()
    ]
    assert sketch_ids == ids
    minhash = pq.read_table(staging / "sketches.parquet" / RUN_PART.format(1)).column("minhash")
    assert minhash.type.list_size == settings.num_perm
    assert min(v for row in minhash.to_pylist()[:5] for v in row) >= 0  # widened uint32
    texts = pq.read_table(work / "ingest_texts" / RANGE_FILE.format(1))
    assert texts.column("doc_id").to_pylist()[:3] == [0, 1, 2]  # task-local ids in the work file


def test_pages_parts_join_records_sketches_and_the_inputs_sized_rows(tmp_path):
    """Each input's pages part: every record once with its global id, in order, its sketch
    figures, and the cluster columns of the sized assignment rows dealt to its input (a
    cluster across the two inputs) or, for the other eligible pages, their own; the skipped
    records counted by reason."""
    settings = Settings()
    work, staging = tmp_path / "work", tmp_path / "staging"
    src0 = _jsonl(tmp_path / "in0.jsonl", 30, 0)
    with open(src0, "a", encoding="utf-8") as out:  # a record without text: skipped
        out.write(json.dumps({"url": "https://site.test/empty", "text": ""}) + "\n")
    n0, _ = ingest_input(0, str(src0), settings, work)
    n1, _ = ingest_input(1, str(_jsonl(tmp_path / "in1.jsonl", 20, 100)), settings, work)
    assert (n0, n1) == (31, 20)
    # doc 5 (input 0) and doc 40 (input 1, its 10th record) in one cluster led by doc 5
    rows = {
        0: [(5, 5, 5, 5, 5, 1.0, 2), (6, 6, 6, 6, 6, 1.0, 1)],
        1: [(40, 5, 5, 40, 40, 0.95, 2)],
    }
    for idx, part in rows.items():
        folder = work / SIZED / f"{RANGE_IDX}={idx}"
        folder.mkdir(parents=True)
        columns = list(zip(*part, strict=True))
        table = pa.Table.from_arrays(
            [pa.array(c, f.type) for c, f in zip(columns, SIZED_SCHEMA, strict=True)],
            schema=SIZED_SCHEMA,
        )
        pq.write_table(table, folder / "part-0.parquet")
    skipped = [
        write_pages_part(RangeShift(idx, shift, end), work, staging, settings.min_tokens)
        for idx, shift, end in ((0, 0, n0), (1, n0, n0 + n1))
    ]
    parts = sorted((staging / "pages.parquet").glob("*.parquet"))
    assert [p.name for p in parts] == [RUN_PART.format(0), RUN_PART.format(1)]
    pages = [r for p in parts for r in pq.read_table(p).to_pylist()]
    assert [r["doc_id"] for r in pages] == list(range(n0 + n1))
    by_id = {r["doc_id"]: r for r in pages}
    assert by_id[40]["url"] == "https://site.test/p109"
    assert (by_id[40]["cluster_id"], by_id[40]["cluster_size"]) == (5, 2)
    assert by_id[40]["is_representative"] is False and by_id[5]["is_representative"] is True
    assert by_id[40]["similarity_to_representative"] == pytest.approx(0.95)
    assert by_id[6]["cluster_size"] == 1
    # an eligible page without a sized row gets its own: alone, resemblance 1
    own = by_id[7]
    assert (own["cluster_id"], own["component_id"], own["identical_id"]) == (7, 7, 7)
    assert (own["class_id"], own["cluster_size"], own["is_representative"]) == (7, 1, True)
    assert own["similarity_to_representative"] == 1.0
    assert by_id[7]["n_tokens"] == 60  # the sketch figures of the input's texts file
    assert by_id[30]["url"] == "https://site.test/empty" and by_id[30]["skipped_reason"]
    reasons = [r["skipped_reason"].split(":")[0] for r in pages if r["skipped_reason"]]
    assert sum(sum(s.values()) for s in skipped) == len(reasons) >= 1
    assert skipped == [{"empty text": 1}, {}]
    assert by_id[30]["cluster_id"] is None  # not eligible: no row of its own


def test_a_run_without_text_stages_none(tmp_path):
    """With `--no-text` (`keep_text=False`) the ingest's work file of each range holds its
    rows' sketches but no text (nothing reads it: `run_parts` writes `page_text` without
    rows); with text, the text the input held. Ten million web-like pages' text staged
    filled the 28 GB this machine had free."""
    src = _jsonl(tmp_path / "in.jsonl", 300)
    got = {}
    for keep in (True, False):
        work = tmp_path / f"work-{keep}"
        records, _ = ingest_input(0, str(src), Settings(keep_text=keep), work)
        assert records == 300
        staged = pq.read_table(work / spark_ingest.TEXTS / RANGE_FILE.format(0))
        assert staged.num_rows == 300
        got[keep] = staged
    assert got[True].column("text").null_count == 0
    assert got[True].column("text")[0].as_py().startswith("w0 w1")
    assert got[False].column("text").null_count == 300
    assert got[False].drop_columns(["text"]).equals(got[True].drop_columns(["text"]))
