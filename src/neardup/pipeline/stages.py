"""The scan's stages, in their order, once for every engine.

    ingest -> [count common shingles] -> sketch -> [features] -> near -> cluster

`STAGES` is that order, with each stage's summary key (`stage_seconds`), progress label and
the condition under which it runs; `run_stages` walks it, timing each stage with the scan's
`stage(...)` context and calling the engine's implementation of it (`StageSteps`). An engine
therefore decides how a stage runs (local processes, Spark jobs), never which stages run or
in which order, and the two engines cannot drift apart in their sequence.

What only one engine needs is not a stage of this order but the setup and teardown of its
`ScanEngine.steps` context: the Spark engine starts its session there (key `spark`) and,
when the steps are done, has its executors write the run's tables as Parquet datasets
(key `tables`; the run database then only holds views over them), timing both with the
same `stage(...)`; the embedded engine opens and closes its worker pool there,
untimed. Hooks rather than optional shared steps, because they belong to no other engine
and make no table of the shared layout: a stage here is something every engine does.

The optional stages depend on the settings and the data only, never on the engine: `count`
when the common-shingle filter is on and more pages have text than `max_shingle_df`,
`features` for the feature methods. An engine that does not implement one refuses such
settings before it starts (the Spark engine's `check_settings`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from neardup.config import Settings
from neardup.ingest.readers import input_bytes
from neardup.pipeline.executors.base import ScanEngine, StagesOutcome, StageSteps, StageTimer
from neardup.pipeline.progress import Progress
from neardup.pipeline.steps.features import FEATURE_METHODS


def _always(settings: Settings, with_text: int) -> bool:
    return True


def _drops_common_shingles(settings: Settings, with_text: int) -> bool:
    """Counting shingles only pays when some shingle could exceed the cap."""
    return bool(settings.max_shingle_df) and with_text > settings.max_shingle_df


def _has_features(settings: Settings, with_text: int) -> bool:
    return settings.method in FEATURE_METHODS


@dataclass(frozen=True)
class Stage:
    """One stage of the scan: how it is reported and when it runs."""

    key: str  # its entry in the summary's `stage_seconds`
    label: str | Callable[[Settings], str]  # the progress bar's name
    run: Callable[[StageSteps, StagesOutcome], None]  # the engine's implementation of it
    per_page: bool = False  # progress counts pages with text (known after ingest)
    when: Callable[[Settings, int], bool] = _always  # (settings, pages with text) -> runs?
    # progress counts input bytes, of this total (None: unknown), as the readers consume them
    input_size: Callable[[list[str]], int | None] | None = None

    def label_for(self, settings: Settings) -> str:
        return self.label if isinstance(self.label, str) else self.label(settings)


STAGES: tuple[Stage, ...] = (
    Stage("ingest", "read + extract", lambda steps, out: steps.ingest(out), input_size=input_bytes),
    Stage(
        "count",
        "count shingles",
        lambda steps, out: steps.count(out),
        per_page=True,
        when=_drops_common_shingles,
    ),
    Stage("sketch", "sketch", lambda steps, out: steps.sketch(out), per_page=True),
    Stage(
        "features",
        lambda settings: settings.method,
        lambda steps, out: steps.features(out),
        per_page=True,
        when=_has_features,
    ),
    Stage("near", "candidates + verify", lambda steps, out: steps.near(out)),
    Stage("cluster", "cluster", lambda steps, out: steps.cluster(out)),
)


def run_stages(
    engine: ScanEngine,
    inputs: list[str],
    staging: Path,
    settings: Settings,
    base_url: str | None,
    stage: StageTimer,
    progress: Progress,
) -> StagesOutcome:
    """Run `STAGES` on `engine`, leaving the staging tables in `staging`."""
    outcome = StagesOutcome(engine=engine.name)
    with engine.steps(inputs, staging, settings, base_url, stage, progress) as steps:
        for step in STAGES:
            if not step.when(settings, outcome.with_text):
                continue
            if step.input_size is not None:
                total, unit = (step.input_size(inputs) if progress.shown else None), "bytes"
            else:
                total, unit = (outcome.with_text if step.per_page else None), "items"
            with stage(step.key, step.label_for(settings), total, unit=unit):
                step.run(steps, outcome)
        outcome.workers = steps.workers
    return outcome
