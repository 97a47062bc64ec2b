"""What a scan engine does and what it hands back, whichever engine it is.

`neardup.pipeline.scan.scan` prepares a staging directory and runs the stages that turn inputs
into the staging tables (`pages_raw`, `page_text`, `links`, `sketches`, `signatures.npy`,
`pairs`, `containment`, `assignments`), then builds the store from those tables itself. The
order of the stages is `neardup.pipeline.stages.STAGES`, the same for every engine; an engine
only supplies `StageSteps`, one method per stage, and whatever it must set up before the
first and finish after the last (see `ScanEngine.steps`). The pipeline therefore never knows
whether the stages ran in local worker processes or on a Spark cluster; both engines write
the same tables, row for row.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from neardup.config import Settings
from neardup.pipeline.progress import Progress

# stage(key, label, total) times one stage and shows it as one progress bar.
StageTimer = Callable[..., AbstractContextManager[None]]


class EngineUnavailableError(RuntimeError):
    """An engine cannot start here (its package or runtime is missing). Defined with the
    interface, so callers can catch it without importing the engine."""


@dataclass
class StagesOutcome:
    """The figures of the stages that the scan summary reports."""

    records: int = 0
    with_text: int = 0
    formats: Counter[str] = field(default_factory=Counter)
    workers: int = 1
    bands: int = 0
    rows_per_band: int = 0
    candidates: int = 0
    candidates_emitted: int = 0
    large_buckets: int = 0
    verified_pairs: int = 0
    pairs_rows: int = 0
    containment_rows: int = 0
    method_stats: dict[str, Any] = field(default_factory=dict)
    engine: str = "embedded"


class StageSteps(Protocol):
    """One scan's stages as one engine runs them, a method per key of `STAGES`, called in
    that order. Each method leaves its tables in the staging folder (or wherever the
    engine's teardown collects them from) and records its figures in `outcome`."""

    workers: int  # the parallelism the stages ran with; the store build reuses it

    def ingest(self, outcome: StagesOutcome) -> None:
        """Read and extract every input; set records, with_text and formats."""
        ...

    def count(self, outcome: StagesOutcome) -> None:
        """Count shingle document frequencies (only when `max_shingle_df` asks for it)."""
        ...

    def sketch(self, outcome: StagesOutcome) -> None:
        """Sketch every page with text."""
        ...

    def features(self, outcome: StagesOutcome) -> None:
        """Compute the feature method's features (only for those methods)."""
        ...

    def near(self, outcome: StagesOutcome) -> None:
        """Find and verify near-duplicate pairs; write `pairs` and `containment`; set the
        candidate and pair figures."""
        ...

    def cluster(self, outcome: StagesOutcome) -> None:
        """Cluster the verified graph; write `assignments`."""
        ...


class ScanEngine(Protocol):
    """Supplies the steps of a scan; `neardup.pipeline.stages.run_stages` runs them."""

    name: str

    def steps(
        self,
        inputs: list[str],
        staging: Path,
        settings: Settings,
        base_url: str | None,
        stage: StageTimer,
        progress: Progress,
    ) -> AbstractContextManager[StageSteps]:
        """Set up for one scan and yield its steps; on a clean exit, leave the staging
        tables in `staging`. Setup and teardown of the engine's own (starting Spark,
        collecting its tables) are timed with `stage` under keys of the engine's own, so
        they show in the summary's `stage_seconds` next to the shared stages."""
        ...
