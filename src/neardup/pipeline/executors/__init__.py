"""Engines that run the scan's stages, and the local process pool the embedded one uses.

The pipeline talks to a `ScanEngine`; `EmbeddedEngine` (the default) runs the stages on this
machine, `neardup.pipeline.executors.spark.SparkEngine` on Spark. `engine_named` picks one by
name, importing Spark only when it is asked for.
"""

from __future__ import annotations

from typing import Any

from neardup.pipeline.executors.base import EngineUnavailableError, ScanEngine, StagesOutcome
from neardup.pipeline.executors.local import LocalEngine, default_workers

ENGINES = ("embedded", "spark")


def engine_named(
    name: str,
    workers: int | None = None,
    spark_master: str | None = None,
    spark_conf: dict[str, str] | None = None,
    spark_work: str | None = None,
) -> Any:
    """The engine called `name` ('embedded' or 'spark')."""
    if name == "embedded":
        # Imported here: the stages import this package for `LocalEngine`.
        from neardup.pipeline.executors.embedded import EmbeddedEngine

        return EmbeddedEngine(workers)
    if name == "spark":
        from neardup.pipeline.executors.spark import SparkEngine

        return SparkEngine(master=spark_master, conf=spark_conf, workers=workers, work=spark_work)
    raise ValueError(f"unknown engine {name!r}; choose one of {', '.join(ENGINES)}")


__all__ = [
    "ENGINES",
    "EngineUnavailableError",
    "LocalEngine",
    "ScanEngine",
    "StagesOutcome",
    "default_workers",
    "engine_named",
]
