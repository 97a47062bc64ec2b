"""`run_apart` runs one call in a worker process of its own (the embedded store build of a
large run): its result and its errors come back, and a run built that way is the run built
in the scanning process, table for table."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import neardup
from neardup.pipeline import scan as scan_module
from neardup.pipeline.executors.local import run_apart


def _pid_and_sum(a: int, b: int) -> tuple[int, int]:
    return os.getpid(), a + b


def _fails(message: str) -> None:
    raise ValueError(message)


def test_the_call_runs_elsewhere_and_its_result_comes_back() -> None:
    pid, total = run_apart(_pid_and_sum, 2, 3)
    assert total == 5 and pid != os.getpid()


def test_an_error_in_the_call_is_raised_here() -> None:
    with pytest.raises(ValueError, match="no store"):
        run_apart(_fails, "no store")


def test_a_store_built_apart_is_the_store_built_here(
    demo_crawl, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    here = neardup.scan(demo_crawl.warc_paths, tmp_path / "here", workers=2)
    monkeypatch.setattr(scan_module, "STORE_APART_RECORDS", 0)
    calls = []

    def counted(fn, *args):
        calls.append(fn.__name__)
        return run_apart(fn, *args)

    monkeypatch.setattr(scan_module, "run_apart", counted)
    apart = neardup.scan(demo_crawl.warc_paths, tmp_path / "apart", workers=2)
    assert calls == ["build_store"] and here.summary["records"] > 0
    for key in ("records", "sketched", "clusters", "pairs_rows", "skipped_by_reason"):
        assert apart.summary[key] == here.summary[key], key
    for table in ("pages", "pairs", "clusters", "links"):
        a = (Path(here.path) / f"{table}.parquet").read_bytes()
        b = (Path(apart.path) / f"{table}.parquet").read_bytes()
        assert a == b, table
