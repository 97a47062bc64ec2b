"""The embedded engine: every stage on this machine, in local worker processes.

The default: it needs nothing but the package, streams its input and keeps memory bounded
(see `LocalEngine`). The Spark engine (`neardup.pipeline.executors.spark`) runs the same stages
on a cluster; the order of both is `neardup.pipeline.stages.STAGES`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from neardup.config import Settings
from neardup.pipeline.char_table_cache import prime_char_table
from neardup.pipeline.executors.base import StagesOutcome, StageTimer
from neardup.pipeline.executors.local import LocalEngine
from neardup.pipeline.progress import Progress
from neardup.pipeline.steps import features as features_step
from neardup.pipeline.steps import sketch as sketch_step
from neardup.pipeline.steps.clusters import run_clusters
from neardup.pipeline.steps.features import Features, run_features
from neardup.pipeline.steps.ingest_ranges import run_ingest
from neardup.pipeline.steps.near import NearResult, run_near, write_containment, write_pairs
from neardup.pipeline.steps.near_parts import (
    PartedNear,
    cluster_parted,
    parted_near_applies,
    run_near_parted,
)
from neardup.pipeline.steps.sketch import (
    SketchResult,
    count_common_shingles,
    run_sketch,
    sketches_in_ingest,
)

# Imported by every worker before its first task (see `LocalEngine`).
WORKER_PRELOAD = ("neardup.pipeline.executors.worker",)


class EmbeddedEngine:
    """Stages in local processes (`workers` of them; all cores when None)."""

    name = "embedded"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    @contextmanager
    def steps(
        self,
        inputs: list[str],
        staging: Path,
        settings: Settings,
        base_url: str | None,
        stage: StageTimer,
        progress: Progress,
    ) -> Iterator[EmbeddedSteps]:
        """The worker pool lives as long as the steps; nothing to set up or collect."""
        _forget_common_shingles()
        try:
            with LocalEngine(self.workers, preload=WORKER_PRELOAD) as pool:
                yield EmbeddedSteps(pool, inputs, staging, settings, base_url, progress)
        finally:
            _forget_common_shingles()


def _forget_common_shingles() -> None:
    """Drop this process's cached common-shingle filters. The sketch and feature steps
    cache the filter by its path, and the next scan to the same output reuses that path
    (`.NAME.staging-PID`): a task run in this process (one worker, or a stage of one task)
    would read the previous scan's filter. Workers are new for every scan."""
    sketch_step._load_common.cache_clear()
    features_step._load_common.cache_clear()


class EmbeddedSteps:
    """One scan's stages in this process and its pool; each stage's result is kept for the
    next (the sketch for the near stage, the near result for clustering)."""

    def __init__(
        self,
        pool: LocalEngine,
        inputs: list[str],
        staging: Path,
        settings: Settings,
        base_url: str | None,
        progress: Progress,
    ) -> None:
        self.pool = pool
        self.workers = pool.workers
        self.inputs = inputs
        self.staging = staging
        self.settings = settings
        self.base_url = base_url
        self.progress = progress
        self._sketched: SketchResult | None = None
        self._features: Features | None = None
        self._near: NearResult | PartedNear | None = None

    def ingest(self, outcome: StagesOutcome) -> None:
        advance = self.progress.advance
        sketch = sketches_in_ingest(self.settings)
        if sketch:
            prime_char_table()  # for the tasks that run in this process
        ingest = run_ingest(
            self.inputs, self.staging, self.settings, self.pool, self.base_url, advance, sketch
        )
        outcome.records = ingest.records
        outcome.with_text = ingest.with_text
        outcome.formats = ingest.formats
        self._sketched = ingest.sketched

    def count(self, outcome: StagesOutcome) -> None:
        prime_char_table()  # for the tasks that run in this process
        count_common_shingles(self.staging, self.settings, self.pool, self.progress.advance)

    def sketch(self, outcome: StagesOutcome) -> None:
        """Nothing left to do when the ingest sketched the pages (`sketches_in_ingest`)."""
        if self._sketched is not None:
            self.progress.advance(self._sketched.sketched)
            return
        prime_char_table()
        self._sketched = run_sketch(self.staging, self.settings, self.pool, self.progress.advance)

    def features(self, outcome: StagesOutcome) -> None:
        prime_char_table()
        self._features = run_features(self.staging, self.settings, self.pool, self.progress.advance)

    def near(self, outcome: StagesOutcome) -> None:
        """On the pool's workers, by parts of the bucket keys (`steps.near_parts`), where
        there are workers and the method is one of `near_pairs`'s; otherwise in this
        process, the pool's workers let go first, so their memory is back before the stage
        that holds the whole candidate graph."""
        if self._sketched is None:
            raise RuntimeError("the near stage needs the sketch stage first")
        if parted_near_applies(self.settings, self._sketched, self.pool.workers):
            # Fresh workers for the stage: the ingest's keep what their allocators hold (the
            # tree's peak in the stage 850 MiB with fresh ones, 1,143 without, at a million
            # pages and two workers, in no less CPU).
            self.pool.close()
            parted = run_near_parted(self.staging, self.settings, self._sketched, self.pool)
            self._sketched = self._features = None
            outcome.bands = parted.bands
            outcome.rows_per_band = parted.rows_per_band
            outcome.candidates = parted.candidates
            outcome.candidates_emitted = parted.stats.emitted
            outcome.large_buckets = parted.stats.large_buckets
            outcome.verified_pairs = parted.verified_pairs
            outcome.pairs_rows = parted.pairs_rows
            outcome.containment_rows = parted.containment_rows
            self._near = parted
            return
        self.pool.close()
        near = run_near(self.staging, self.settings, self._sketched, self._features)
        self._features = None
        self._sketched = None  # per-page arrays the cluster stage does not need
        outcome.bands = near.bands
        outcome.rows_per_band = near.rows_per_band
        outcome.candidates = near.candidates
        outcome.candidates_emitted = near.stats.emitted
        outcome.large_buckets = near.stats.large_buckets
        outcome.verified_pairs = int(near.edge_a.size)
        outcome.pairs_rows = write_pairs(self.staging / "pairs.parquet", near)
        outcome.containment_rows = write_containment(self.staging / "containment.parquet", near)
        outcome.method_stats = near.method_stats
        self._near = near

    def cluster(self, outcome: StagesOutcome) -> None:
        if self._near is None:
            raise RuntimeError("the cluster stage needs the near stage first")
        if isinstance(self._near, PartedNear):
            cluster_parted(self._near, self.settings, self.pool)
        else:
            run_clusters(self.staging, self._near, self.settings)
