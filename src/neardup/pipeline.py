"""`scan`: the whole pipeline from input files to a finished run directory.

ingest -> sketch -> near-duplicate pairs -> clusters -> store. Stages exchange Parquet files
in a staging directory next to the output; the finished directory replaces the output in one
rename, so an interrupted scan never leaves a half-written run.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neardup.engine import LocalEngine
from neardup.ingest import detect_input_kind
from neardup.progress import Progress, SilentProgress
from neardup.settings import Settings
from neardup.stages.clusters import run_clusters
from neardup.stages.features import FEATURE_METHODS, run_features
from neardup.stages.ingest import run_ingest
from neardup.stages.near import run_near, write_containment, write_pairs
from neardup.stages.sketch import count_common_shingles, run_sketch
from neardup.store import build_store


class OutputExistsError(FileExistsError):
    """The output directory holds something and replacing it was not asked for."""


@dataclass
class ScanResult:
    """Where the run is and what it found (the same figures as `summary.json`)."""

    path: Path
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def stage_seconds(self) -> dict[str, float]:
        return self.summary.get("stage_seconds", {})


def _prepare_output(out: Path, force: bool) -> Path:
    if out.exists() and not out.is_dir():
        raise OutputExistsError(f"{out} exists and is not a directory")
    if out.exists() and any(out.iterdir()) and not force:
        raise OutputExistsError(f"{out} is not empty; pass force=True (--force) to replace it")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.staging-{os.getpid()}"
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    return staging


def _publish(staging: Path, out: Path) -> None:
    """Swap the finished staging directory into place."""
    old = out.parent / f".{out.name}.old-{os.getpid()}"
    if out.exists():
        out.rename(old)
    staging.rename(out)
    if old.exists():
        shutil.rmtree(old)


def scan(
    inputs: list[str | Path],
    out: str | Path,
    settings: Settings | None = None,
    workers: int | None = None,
    base_url: str | None = None,
    force: bool = False,
    progress: Progress | None = None,
) -> ScanResult:
    """Find near-duplicate clusters in `inputs` (WARC/ARC files, HTML folders, JSONL or
    Parquet tables) and write a run directory at `out`."""
    settings = settings or Settings()
    progress = progress or SilentProgress()
    paths = [str(p) for p in inputs]
    if not paths:
        raise ValueError("no input given")
    for path in paths:
        detect_input_kind(path)  # fails early, before any work, on an unreadable input
    out = Path(out)
    staging = _prepare_output(out, force)
    times: dict[str, float] = {}
    started = time.perf_counter()

    @contextmanager
    def stage(key: str, label: str, total: int | None = None) -> Iterator[None]:
        """Time a stage and show it as one progress bar."""
        t = time.perf_counter()
        progress.stage(label, total)
        yield
        progress.done()
        times[key] = time.perf_counter() - t

    try:
        with LocalEngine(workers) as engine:
            with stage("ingest", "read + extract"):
                ingest = run_ingest(paths, staging, settings, engine, base_url, progress.advance)
            n_workers = engine.workers
            if settings.max_shingle_df and ingest.with_text > settings.max_shingle_df:
                with stage("count", "count shingles", ingest.with_text):
                    count_common_shingles(staging, settings, engine, progress.advance)
            with stage("sketch", "sketch", ingest.with_text):
                sketched = run_sketch(staging, settings, engine, progress.advance)
            features = None
            if settings.method in FEATURE_METHODS:
                with stage("features", settings.method, ingest.with_text):
                    features = run_features(staging, settings, engine, progress.advance)

        with stage("near", "candidates + verify"):
            near = run_near(staging, settings, sketched, features)
            del features
            n_pairs = write_pairs(staging / "pairs.parquet", near)
            n_contained = write_containment(staging / "containment.parquet", near)
        with stage("cluster", "cluster"):
            run_clusters(staging, near, settings)
        with stage("store", "store"):
            summary = build_store(staging, settings, workers=n_workers)

        elapsed = time.perf_counter() - started
        summary.update(
            {
                "inputs": paths,
                "formats": dict(ingest.formats),
                "common_shingle_filter": "count" in times,
                "candidate_method": settings.method,
                "bands": near.bands,
                "rows_per_band": near.rows_per_band,
                "candidate_pairs": near.candidates,
                "candidate_pairs_emitted": near.stats.emitted,
                "large_buckets": near.stats.large_buckets,
                "verified_pairs": int(near.edge_a.size),
                "method_stats": near.method_stats,
                "containment_pairs": n_contained if settings.containment is not None else None,
                "pairs_rows": n_pairs,
                "stage_seconds": {k: round(v, 3) for k, v in times.items()},
                "elapsed_seconds": round(elapsed, 3),
                "records_per_second": round(ingest.records / elapsed, 1) if elapsed else None,
            }
        )
        summary = {k: (int(v) if isinstance(v, np.integer) else v) for k, v in summary.items()}
        (staging / "settings.json").write_text(settings.to_json() + "\n", encoding="utf-8")
        (staging / "summary.json").write_text(
            json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
        )
        _publish(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return ScanResult(path=out, summary=summary)
