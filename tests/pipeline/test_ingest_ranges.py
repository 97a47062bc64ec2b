"""The embedded ingest by ranges (`steps/ingest_ranges.py`): many small inputs gathered into
tasks of a useful size, large ones cut, and the progress adding up to the inputs' bytes;
document ids in input order whatever the cut; a failed task never leaves the ones after it
waiting."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from neardup.config import Settings
from neardup.ingest import iter_records
from neardup.ingest.input_ranges import RANGE_BYTES_VARIABLE, group_ranges, plan_ranges
from neardup.ingest.readers import expand_inputs, input_bytes
from neardup.pipeline.executors.local import LocalEngine
from neardup.pipeline.executors.ordered_totals import EarlierTaskFailed, OrderedTotals
from neardup.pipeline.steps.ingest_ranges import run_ingest


def _jsonl(path: Path, tag: str, n: int) -> str:
    rows = [
        {"url": f"http://{tag}.example/{i}", "text": f"page {i} of {tag} " * 30} for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture
def crawl(tmp_path: Path) -> list[str]:
    small = tmp_path / "small"
    small.mkdir()
    for k in range(40):
        _jsonl(small / f"f{k:02d}.jsonl", f"s{k}", 3)
    big = _jsonl(tmp_path / "big.jsonl", "big", 400)
    return [str(small), big, _jsonl(tmp_path / "last.jsonl", "last", 5)]


@pytest.mark.parametrize("workers", [1, 2])
def test_small_files_are_gathered_and_large_ones_cut(
    tmp_path: Path, crawl: list[str], workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(RANGE_BYTES_VARIABLE, "20000")
    groups = group_ranges(plan_ranges(expand_inputs(crawl)))
    gathered = [g for g in groups if len(g) > 1]
    cut = [g for g in groups if g[0].cut]
    assert gathered and len(cut) > 3  # 40 small files in a few tasks; the big one in many
    staging = tmp_path / "staging"
    staging.mkdir()
    heard: list[int] = []
    with LocalEngine(workers) as engine:
        result = run_ingest(crawl, staging, Settings(), engine, advance=heard.append)
    assert sum(heard) == input_bytes(crawl)
    parts = sorted((staging / "pages_raw.parquet").glob("*.parquet"))
    assert len(parts) == len(groups) < 40
    pages = pq.read_table(staging / "pages_raw.parquet")
    want = list(iter_records(crawl))
    assert result.records == pages.num_rows == len(want) == 40 * 3 + 400 + 5
    assert pages.column("doc_id").to_pylist() == list(range(len(want)))
    assert pages.column("url").to_pylist() == [r.url for r in want]
    assert pages.column("record_offset").to_pylist() == [r.offset for r in want]


def test_a_failed_task_stops_the_ones_waiting_on_it(tmp_path: Path) -> None:
    with OrderedTotals(tmp_path / "ring", slots=4, width=2) as totals:
        handle = totals.handle
        assert handle.wait(0) == (0, 0)
        handle.publish(1, (5, 7))
        assert handle.wait(1) == (5, 7)
        handle.fail(2)
        with pytest.raises(EarlierTaskFailed):
            handle.wait(2)
        handle.publish(5, (9, 9))  # the ring wraps: slot 1 again, for task 5
        assert handle.wait(5) == (9, 9)
    assert not (tmp_path / "ring").exists()
