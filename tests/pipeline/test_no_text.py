"""`--no-text` (`Settings.keep_text=False`): the run holds `page_text` with no rows, and
every other table and matrix is the one a scan that keeps the text writes (DuckDB `EXCEPT
ALL` both ways, the matrices byte for byte), whichever stage reads the text back during the
scan (the sketch pass behind the common-shingle filter, a feature method, exact
verification) or none does (the workers then send no text at all)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
from run_tables import tables_differ

import neardup
from neardup.config import Settings
from neardup.ingest.eligibility import rule_of
from neardup.ingest.tables import iter_jsonl_blocks
from neardup.pipeline.steps.ingest import PAGE_TEXT_SCHEMA, _extract_task, text_read_back
from neardup.store import load_settings
from tests.ccwarc import Fetch, write_warc

WORDS = ("page", "text", "kept", "or", "not", "near", "copies", "of", "the", "same", "crawl")


def _inputs(folder: Path) -> list[str]:
    """A request-first WARC with near-duplicate pages and a redirect, and a JSONL file
    with copies, a bad line and a blank one."""
    rng = np.random.default_rng(11)
    base = [WORDS[i] for i in rng.integers(0, len(WORDS), 200)]

    def variant(k: int) -> str:
        words = list(base)
        for i in rng.integers(0, len(words), k):
            words[i] = "changed"
        return " ".join(words)

    fetches = [
        Fetch(f"https://a.example/{i}", f"<html><body><p>{variant(i % 4)}</p></body></html>")
        for i in range(24)
    ]
    fetches.append(Fetch("https://a.example/old", status=301, location="https://a.example/0"))
    warc = write_warc(folder / "crawl.warc.gz", fetches, request_first=True)
    lines = [
        json.dumps({"url": f"https://b.example/{i}", "text": variant(i % 6)}) for i in range(40)
    ]
    lines[5] = '{"url": "https://b.example/bad", "text": "no end'
    lines[6] = ""
    jsonl = folder / "rows.jsonl"
    jsonl.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [str(warc), str(jsonl)]


VARIANTS = {
    "default": {},
    "exact verification": {"verify": "exact"},
    "common-shingle filter": {"max_shingle_df": 20},
    "chunks": {"method": "chunks"},
}


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_run_without_text_holds_every_other_table_as_with_it(
    tmp_path: Path, variant: str
) -> None:
    inputs = _inputs(tmp_path)
    settings = Settings(**VARIANTS[variant])
    kept = neardup.scan(inputs, tmp_path / "kept", settings=settings, workers=2)
    dropped = neardup.scan(
        inputs,
        tmp_path / "dropped",
        settings=dataclasses.replace(settings, keep_text=False),
        workers=2,
    )
    assert tables_differ(kept.path, dropped.path, skip=("page_text.parquet",)) == []
    assert pq.read_table(kept.path / "pairs.parquet").num_rows > 0  # real pairs compared
    text = pq.read_table(dropped.path / "page_text.parquet")
    assert text.num_rows == 0 and text.schema.equals(PAGE_TEXT_SCHEMA)
    sketched = pq.read_table(kept.path / "sketches.parquet").num_rows  # a row a page with text
    assert pq.read_table(kept.path / "page_text.parquet").num_rows == sketched > 0
    recorded = json.loads((dropped.path / "settings.json").read_text(encoding="utf-8"))
    assert recorded["keep_text"] is False
    assert load_settings(kept.path).keep_text is True
    for key in ("records", "sketched", "skipped", "verified_pairs", "clusters"):
        assert dropped.summary[key] == kept.summary[key], key
    with duckdb.connect(str(dropped.path / "neardup.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM page_text").fetchone() == (0,)


def test_the_text_comes_back_from_the_workers_only_when_something_reads_it() -> None:
    assert text_read_back(Settings())
    assert not text_read_back(Settings(keep_text=False))
    assert text_read_back(Settings(keep_text=False, verify="exact"))
    assert text_read_back(Settings(keep_text=False, max_shingle_df=5))
    assert text_read_back(Settings(keep_text=False, method="simhash"))
    assert not text_read_back(Settings(keep_text=False, method="supershingles"))


def test_a_task_without_its_text_still_sketches_every_page(tmp_path: Path) -> None:
    """What a worker sends back: the document ids of the pages with text and their
    sketches, the same sketches as with the text."""
    rows = tmp_path / "rows.jsonl"
    lines = [
        json.dumps({"url": f"https://c.example/{i}", "text": f"words {i} " * 30}) for i in range(9)
    ]
    rows.write_text("\n".join(lines) + "\n", encoding="utf-8")
    (block,) = list(iter_jsonl_blocks(str(rows)))
    settings = Settings(keep_text=False)
    rule = rule_of(settings)
    with_text = _extract_task((block, settings.max_payload_bytes, True, rule, settings, True))
    without = _extract_task((block, settings.max_payload_bytes, True, rule, settings, False))
    assert with_text.texts.num_columns == 2 and without.texts.num_columns == 1
    assert without.texts.column(0).equals(with_text.texts.column(0))
    assert with_text.sketch is not None and without.sketch is not None
    assert np.array_equal(with_text.sketch.minhash, without.sketch.minhash)
    assert without.pages.equals(with_text.pages)
