"""The progress display of long commands: Rich bars on stderr, one per pipeline stage.

The pipeline reports through a small protocol (`stage`, `advance`, `done`); this class is the
command line's implementation of it, kept apart so every command that scans can share it.
Reading counts bytes of input against the inputs' total size, so its bar has a total and an
ETA wherever the size is known (files, and URLs whose server says); the stages after it count
pages.
"""

from __future__ import annotations

import sys
from typing import Any

from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from neardup.cli.output import console, to_terminal
from neardup.pipeline.progress import Unit


def show_progress(quiet: bool) -> bool:
    """Bars only for a person at a terminal: not with `-q`, and not when stdout goes to a
    pipe or a file (a script reads the results), nor when stderr, where the bars are
    drawn, is not a terminal."""
    return not quiet and to_terminal() and sys.stderr.isatty()


class _Done(ProgressColumn):
    """Done of total: `1,204/5,000` for pages, `12.3/45.6 MB` for bytes of input."""

    def __init__(self) -> None:
        super().__init__()
        self.items = MofNCompleteColumn()
        self.bytes = DownloadColumn()

    def render(self, task: Task) -> Text:
        column = self.bytes if task.fields.get("unit") == "bytes" else self.items
        return column.render(task)


class RichProgress:
    """Progress bars on stderr, one per stage."""

    def __init__(self, enabled: bool) -> None:
        self.bar = Progress(
            SpinnerColumn(),
            TextColumn("[bold]{task.description:<20}"),
            BarColumn(),
            _Done(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),  # an ETA where the stage knows its total
            console=console,
            disable=not enabled,
        )
        self.shown = enabled
        self.task: Any = None

    def __enter__(self) -> RichProgress:
        self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()

    def stage(self, name: str, total: int | None = None, unit: Unit = "items") -> None:
        self.task = self.bar.add_task(name, total=total, unit=unit)

    def advance(self, units: int) -> None:
        if self.task is not None:
            self.bar.advance(self.task, units)

    def done(self) -> None:
        """A finished stage shows a full bar: what it counted, or its total when it counted
        nothing (an engine that does not report within a stage)."""
        if self.task is not None:
            task = self.bar.tasks[self.task]
            final = int(task.completed) or int(task.total or 0) or 1
            self.bar.update(self.task, total=final, completed=final)
            self.task = None
