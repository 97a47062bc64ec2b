"""A stage of one task runs in the scanning process, and the run it makes is the run the worker
processes make; workers start with the stage modules and the character table loaded."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest

from neardup.kernels import chartable
from neardup.pipeline.executors import LocalEngine
from neardup.pipeline.executors.embedded import WORKER_PRELOAD
from neardup.pipeline.scan import scan


def pid_of(x: int) -> tuple[int, int]:
    return x, os.getpid()


def holds_table(x: int) -> bool:
    return chartable.has_char_table()


def test_one_task_runs_here_without_a_pool() -> None:
    with LocalEngine(workers=2) as engine:
        assert list(engine.map(pid_of, [7])) == [(7, os.getpid())]
        assert engine._pool is None
        assert list(engine.map(pid_of, iter([]))) == []
        assert engine._pool is None


def test_two_tasks_go_to_workers_in_order() -> None:
    with LocalEngine(workers=2) as engine:
        results = list(engine.map(pid_of, [1, 2, 3]))  # a list: nothing read twice
        assert [x for x, _ in results] == [1, 2, 3]
        assert all(pid != os.getpid() for _, pid in results)
        # once the pool runs, a stage of one task uses it too
        ((_, pid),) = engine.map(pid_of, iter([4]))
        assert pid != os.getpid()


def test_workers_start_with_the_character_table() -> None:
    with LocalEngine(workers=2, preload=WORKER_PRELOAD) as engine:
        assert list(engine.map(holds_table, range(4))) == [True] * 4


def _always_in_pool(
    self: LocalEngine, fn: Callable[[Any], Any], tasks: Iterable[Any]
) -> Iterator[Any]:
    """`LocalEngine.map` as it was before stages of one task ran in this process."""
    return self._in_pool(fn, tasks)


def _run_tables(run: Path) -> dict[str, Any]:
    """What a run holds, without what differs from one scan to the next (timings, paths)."""
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    for key in ("stage_seconds", "elapsed_seconds", "records_per_second", "inputs"):
        summary.pop(key, None)
    tables = {p.name: pq.read_table(p).to_pylist() for p in sorted(run.glob("*.parquet"))}
    arrays = {p.name: np.load(p).tolist() for p in sorted(run.glob("*.npy"))}
    return {"summary": summary, "tables": tables, "arrays": arrays}


@pytest.fixture
def small_jsonl(tmp_path: Path) -> Path:
    """Three pages, two of them near-duplicates: one ingest batch, one sketch task."""
    base = " ".join(f"word{i}" for i in range(60))
    rows = [
        {"url": "https://a.example/1", "text": base},
        {"url": "https://b.example/1", "text": base.replace("word7", "seven")},
        {"url": "https://c.example/1", "text": "ＡＢＣ１２３ Straße café 世界 " * 20},
    ]
    path = tmp_path / "small.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_small_scan_in_process_equals_the_worker_run(
    small_jsonl: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    inline = scan([small_jsonl], tmp_path / "inline", workers=2)
    with monkeypatch.context() as m:
        m.setattr(LocalEngine, "map", _always_in_pool)
        pooled = scan([small_jsonl], tmp_path / "pooled", workers=2)
    assert inline.summary["verified_pairs"] == 1
    assert _run_tables(inline.path) == _run_tables(pooled.path)


def _boilerplate_jsonl(path: Path, boilerplate: str) -> Path:
    """40 pages sharing one line, enough to cross a common-shingle cap of 5."""
    rows = [
        {
            "url": f"https://p{i}.example/",
            "text": f"{boilerplate} " + " ".join(f"w{(i * 7 + j * 13) % 97}" for j in range(60)),
        }
        for i in range(40)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("workers", [1, 2])
def test_a_second_scan_to_the_same_output_uses_its_own_common_shingles(
    tmp_path: Path, workers: int
) -> None:
    """The second scan's filter has the path of the first's (same output, same process);
    it must not be read from the first scan's cache."""
    from neardup.config import Settings

    settings = Settings(max_shingle_df=5)
    first = _boilerplate_jsonl(tmp_path / "a.jsonl", "alpha beta gamma delta epsilon zeta eta")
    second = _boilerplate_jsonl(tmp_path / "b.jsonl", "one two three four five six seven")
    alone = scan([second], tmp_path / "alone", settings, workers=workers)
    scan([first], tmp_path / "run", settings, workers=workers)
    again = scan([second], tmp_path / "run", settings, workers=workers, force=True)
    assert alone.summary["common_shingle_filter"]
    assert _run_tables(again.path) == _run_tables(alone.path)
