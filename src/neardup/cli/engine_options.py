"""The options that choose an engine, shared by every command that runs on Spark too
(`scan`, `dedup`, `crawl`, `add`): kept apart from the scan's options so that a command
that only needs these does not load what the scan's errors come from."""

from __future__ import annotations

from typing import Annotated

import typer

from neardup.cli.output import fail

EngineName = Annotated[
    str, typer.Option(help="embedded (this machine, the default) or spark (docs/spark.md)")
]
SparkMaster = Annotated[
    str | None,
    typer.Option(help="Spark master for --engine spark (default local[*]; spark-submit's wins)"),
]
SparkWork = Annotated[
    str | None,
    typer.Option(
        help="folder for the Spark engine's tables (default: inside the run's staging "
        "folder); on a cluster, one the driver and every executor can reach"
    ),
]
SparkConf = Annotated[
    list[str] | None,
    typer.Option(help="a Spark setting KEY=VALUE for --engine spark (repeatable)"),
]


def spark_conf_pairs(pairs: list[str] | None) -> dict[str, str]:
    """The `--spark-conf KEY=VALUE` options as settings; a pair without `=` fails."""
    conf: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            fail(f"--spark-conf takes KEY=VALUE, got {pair!r}")
        conf[key.strip()] = value.strip()
    return conf
