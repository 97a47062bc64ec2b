"""The Spark ingest task's own files: whole or absent, and the run's part files in document
order. No Spark needed: these are the functions the tasks run."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

import neardup.pipeline.executors.spark.ingest as spark_ingest
from neardup.config import Settings
from neardup.pipeline.executors.spark.ingest import (
    INGEST_TABLES,
    INPUT_FILE,
    RUN_PART,
    ingest_input,
    publish_input,
)


def _jsonl(path, n, first=0):
    with open(path, "w", encoding="utf-8") as out:
        for i in range(first, first + n):
            words = " ".join(f"w{(i * 7 + j) % 500}" for j in range(60))
            out.write(json.dumps({"url": f"https://site.test/p{i}", "text": words}) + "\n")
            if i % 10 == 3:
                out.write("\n")  # blank lines are not records
    return path


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
        ingest_input(0, str(src), None, Settings(), None, work)
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
        records, formats = ingest_input(idx, str(src), None, settings, None, work)
        assert sum(formats.values()) == n  # every record has text
        counts.append(records)
    assert counts == [1200, 700]  # one record per non-blank line
    shifts = [0, counts[0]]
    for idx, shift in enumerate(shifts):
        publish_input(idx, shift, work, staging, settings.num_perm)
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
    texts = pq.read_table(work / "ingest_texts" / INPUT_FILE.format(1))
    assert texts.column("doc_id").to_pylist()[:3] == [0, 1, 2]  # task-local ids in the work file
