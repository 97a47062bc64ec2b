"""The progress display of long commands: Rich bars on stderr, one per pipeline stage.

The pipeline reports through a small protocol (`stage`, `advance`, `done`); this class is the
command line's implementation of it, kept apart so every command that scans can share it.
"""

from __future__ import annotations

from typing import Any

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from neardup.cli.output import console


class RichProgress:
    """Progress bars on stderr, one per stage."""

    def __init__(self, enabled: bool) -> None:
        self.bar = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description:<20}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),  # an ETA where the stage knows its total
            console=console,
            disable=not enabled,
        )
        self.task: Any = None

    def __enter__(self) -> RichProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def stage(self, name: str, total: int | None = None) -> None:
        self.task = self.bar.add_task(name, total=total)

    def advance(self, units: int) -> None:
        if self.task is not None:
            self.bar.advance(self.task, units)

    def done(self) -> None:
        if self.task is not None:
            task = self.bar.tasks[self.task]
            self.bar.update(self.task, total=task.completed or 1, completed=task.completed or 1)
            self.task = None
