"""What a scan engine does and what it hands back, whichever engine it is.

`neardup.pipeline.scan.scan` prepares a staging directory, asks an engine to run the stages that
turn inputs into the staging tables (`pages_raw`, `page_text`, `links`, `sketches`,
`signatures.npy`, `pairs`, `containment`, `assignments`), then builds the store from those
tables itself. The pipeline therefore never knows whether the stages ran in local worker
processes or on a Spark cluster; both engines write the same tables, row for row.
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


class ScanEngine(Protocol):
    """Runs the scan's stages from the inputs to the staging tables."""

    name: str

    def run_stages(
        self,
        inputs: list[str],
        staging: Path,
        settings: Settings,
        base_url: str | None,
        stage: StageTimer,
        progress: Progress,
    ) -> StagesOutcome:
        """Write the staging tables for `inputs` into `staging`."""
        ...
