"""The embedded engine: every stage on this machine, in local worker processes.

The default: it needs nothing but the package, streams its input and keeps memory bounded
(see `LocalEngine`). The Spark engine (`neardup.pipeline.executors.spark`) runs the same stages
on a cluster.
"""

from __future__ import annotations

from pathlib import Path

from neardup.config import Settings
from neardup.pipeline.executors.base import StagesOutcome, StageTimer
from neardup.pipeline.executors.local import LocalEngine
from neardup.pipeline.progress import Progress
from neardup.pipeline.steps.clusters import run_clusters
from neardup.pipeline.steps.features import FEATURE_METHODS, run_features
from neardup.pipeline.steps.ingest import run_ingest
from neardup.pipeline.steps.near import run_near, write_containment, write_pairs
from neardup.pipeline.steps.sketch import count_common_shingles, run_sketch


class EmbeddedEngine:
    """Stages in local processes (`workers` of them; all cores when None)."""

    name = "embedded"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers

    def run_stages(
        self,
        inputs: list[str],
        staging: Path,
        settings: Settings,
        base_url: str | None,
        stage: StageTimer,
        progress: Progress,
    ) -> StagesOutcome:
        with LocalEngine(self.workers) as engine:
            with stage("ingest", "read + extract"):
                ingest = run_ingest(inputs, staging, settings, engine, base_url, progress.advance)
            if settings.max_shingle_df and ingest.with_text > settings.max_shingle_df:
                with stage("count", "count shingles", ingest.with_text):
                    count_common_shingles(staging, settings, engine, progress.advance)
            with stage("sketch", "sketch", ingest.with_text):
                sketched = run_sketch(staging, settings, engine, progress.advance)
            features = None
            if settings.method in FEATURE_METHODS:
                with stage("features", settings.method, ingest.with_text):
                    features = run_features(staging, settings, engine, progress.advance)
            workers = engine.workers

        with stage("near", "candidates + verify"):
            near = run_near(staging, settings, sketched, features)
            del features
            n_pairs = write_pairs(staging / "pairs.parquet", near)
            n_contained = write_containment(staging / "containment.parquet", near)
        with stage("cluster", "cluster"):
            run_clusters(staging, near, settings)
        return StagesOutcome(
            records=ingest.records,
            with_text=ingest.with_text,
            formats=ingest.formats,
            workers=workers,
            bands=near.bands,
            rows_per_band=near.rows_per_band,
            candidates=near.candidates,
            candidates_emitted=near.stats.emitted,
            large_buckets=near.stats.large_buckets,
            verified_pairs=int(near.edge_a.size),
            pairs_rows=n_pairs,
            containment_rows=n_contained,
            method_stats=near.method_stats,
            engine=self.name,
        )
