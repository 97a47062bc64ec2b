"""Progress with totals: reading counts bytes of input against the inputs' size, so its bar
has a total and an ETA; the bars are drawn for a person at a terminal only."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import neardup
from neardup.cli import progress as cli_progress
from neardup.cli.main import app
from neardup.cli.progress import RichProgress, show_progress
from neardup.ingest.input_ranges import RANGE_BYTES_VARIABLE


class Recorder:
    """A `Progress` that keeps every call, to compare with the files' sizes."""

    def __init__(self, shown: bool = True) -> None:
        self.shown = shown
        self.stages: list[dict] = []

    def stage(self, name: str, total: int | None = None, unit: str = "items") -> None:
        self.stages.append({"name": name, "total": total, "unit": unit, "advances": []})

    def advance(self, units: int) -> None:
        self.stages[-1]["advances"].append(units)

    def done(self) -> None:
        pass


@pytest.mark.parametrize("workers", [1, 2])
def test_reading_counts_the_bytes_of_the_inputs(
    demo_crawl, tmp_path: Path, workers: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bar moves as each range of the input is done (`ingest/input_ranges.py`); ranges
    of 50 kB here, so that it moves within each file of the small demo crawl."""
    monkeypatch.setenv(RANGE_BYTES_VARIABLE, "50000")
    recorder = Recorder()
    inputs = [*demo_crawl.warc_paths]
    neardup.scan(inputs, tmp_path / "run", workers=workers, progress=recorder)
    reading = recorder.stages[0]
    size = sum(os.path.getsize(p) for p in inputs)
    assert reading["name"] == "read + extract" and reading["unit"] == "bytes"
    assert reading["total"] == size
    assert sum(reading["advances"]) == size
    assert all(step > 0 for step in reading["advances"])
    assert len(reading["advances"]) > len(inputs)  # it moves within a file, not per file
    sketch = next(s for s in recorder.stages if s["name"] == "sketch")
    assert sketch["unit"] == "items" and sum(sketch["advances"]) == sketch["total"]


def test_no_sizes_are_asked_when_nobody_sees_the_bar(demo_crawl, tmp_path: Path) -> None:
    """Sizes of URLs cost a request each: unseen progress gets no total, only the bytes."""
    recorder = Recorder(shown=False)
    neardup.scan([demo_crawl.warc_paths[0]], tmp_path / "run", workers=1, progress=recorder)
    reading = recorder.stages[0]
    assert reading["total"] is None and reading["unit"] == "bytes"
    assert sum(reading["advances"]) == os.path.getsize(demo_crawl.warc_paths[0])


def test_the_bar_shows_sizes_with_a_total_and_an_eta() -> None:
    bars = RichProgress(enabled=False)
    bars.stage("read + extract", 3_000_000, "bytes")
    bars.advance(750_000)
    time.sleep(0.05)
    bars.advance(750_000)
    task = bars.bar.tasks[0]
    amount = bars.bar.columns[3]
    assert str(amount.render(task)) == "1.5/3.0 MB"
    assert task.time_remaining is not None  # what the ETA column shows
    bars.done()
    bars.stage("sketch", 40)
    bars.advance(40)
    assert str(amount.render(bars.bar.tasks[1])) == "40/40"


def test_a_stage_that_never_advanced_ends_full_at_its_total() -> None:
    bars = RichProgress(enabled=False)
    bars.stage("read + extract", 1234, "bytes")
    bars.done()
    task = bars.bar.tasks[0]
    assert task.completed == task.total == 1234


def test_bars_only_for_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_progress.sys.stderr, "isatty", lambda: True, raising=False)
    monkeypatch.setattr(cli_progress, "to_terminal", lambda: True)
    assert show_progress(quiet=False)
    assert not show_progress(quiet=True)
    monkeypatch.setattr(cli_progress, "to_terminal", lambda: False)  # stdout is a pipe
    assert not show_progress(quiet=False)


def test_a_scan_to_a_pipe_draws_no_bar(demo_crawl, tmp_path: Path) -> None:
    args = ["scan", str(demo_crawl.warc_paths[0]), "-o", str(tmp_path / "r"), "--workers", "1"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "read + extract" not in result.output
    assert all("\t" in line for line in result.output.splitlines())
