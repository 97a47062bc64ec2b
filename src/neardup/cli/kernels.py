"""The `precompile` command: neardup's kernels compiled ahead of time, so that small
commands start no JIT (registered by `main.py`; `kernels/ahead.py` says what it buys)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from neardup.cli.output import console, fail, out_console

if TYPE_CHECKING:  # the command's own modules load only when it runs (`main.py`)
    from neardup.cli.progress import RichProgress
    from neardup.kernels.ahead_build import ProbeStep, Progress


def probe_steps() -> list[ProbeStep]:
    """What small commands run, in this process (one worker), so that the build learns the
    types they call the kernels with: a generated crawl's WARCs scanned (request-first
    records, revisits, redirects), the run's reports and deduplicated copy, one JSONL record
    scanned, and an index built from the record with a WARC added. One step a command, each
    named, so the display says which the probe is on."""
    from neardup.cli.main import build_app

    app = build_app()

    def run(*args: str) -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # the commands' own reports
            app(list(args), standalone_mode=False)

    def warcs(work: Path) -> list[str]:
        return sorted(str(p) for p in (work / "crawl" / "warc").glob("*.warc.gz"))

    def one(work: Path) -> str:
        record = work / "one.jsonl"
        record.write_text(
            '{"url": "https://example.org/a", "text": "one page of text, with words enough '
            'to make a few shingles of it and a signature"}\n'
        )
        return str(record)

    def report(command: str) -> ProbeStep:
        return (command, lambda w: run(command, str(w / "run"), "--json"))

    return [
        ("demo-crawl", lambda w: run("demo-crawl", str(w / "crawl"), "--pages", "12")),
        ("scan of its WARCs", lambda w: run("scan", *warcs(w), "--out", str(w / "run"), *_ONE)),
        report("clusters"),
        report("mirrors"),
        report("collections"),
        ("dedup", lambda w: run("dedup", "--run", str(w / "run"), "--out", str(w / "clean"), "-q")),
        ("scan of a JSONL record", lambda w: run("scan", one(w), "--out", str(w / "one"), *_ONE)),
        ("add of the record", lambda w: run("add", str(w / "index"), one(w), "--json")),
        ("add of a WARC", lambda w: run("add", str(w / "index"), warcs(w)[0], "--json")),
    ]


_ONE = ("--workers", "1", "-q")


class _Lines:
    """Progress as plain lines on stderr, for a log or a pipe (CI, `scripts/setup.sh`
    through `tee`): a line as each step begins, with its count and the seconds so far, so
    a slow step is seen while it runs, not only at the end."""

    def __init__(self) -> None:
        self.name = ""
        self.total: int | None = None
        self.steps = 0
        self.started = time.perf_counter()

    def stage(self, name: str, total: int | None = None) -> None:
        self.name, self.total, self.steps = name, total, 0
        self.started = time.perf_counter()

    def note(self, what: str) -> None:
        of = f"/{self.total}" if self.total is not None else ""
        seconds = time.perf_counter() - self.started
        line = f"{self.name}: {self.steps + 1}{of} {what} ({seconds:.0f} s)"
        console.print(line, highlight=False, soft_wrap=True)

    def advance(self, units: int) -> None:
        self.steps += units

    def done(self) -> None:
        pass


class _Bar:
    """Progress as a Rich bar a stage (`cli/progress.py`), its text naming the step."""

    def __init__(self, bar: RichProgress) -> None:
        self.bar = bar
        self.name = ""

    def stage(self, name: str, total: int | None = None) -> None:
        self.name = name
        self.bar.stage(name, total)

    def note(self, what: str) -> None:
        if self.bar.task is not None:
            self.bar.bar.update(self.bar.task, description=f"{self.name}: {what}")

    def advance(self, units: int) -> None:
        self.bar.advance(units)

    def done(self) -> None:
        if self.bar.task is not None:
            self.bar.bar.update(self.bar.task, description=self.name)
        self.bar.done()


class _Silent:
    def stage(self, name: str, total: int | None = None) -> None:
        pass

    def note(self, what: str) -> None:
        pass

    def advance(self, units: int) -> None:
        pass

    def done(self) -> None:
        pass


def precompile_command(
    folder: Annotated[
        Path | None,
        typer.Argument(
            help="where to write the module (default: beside the kernels where the package "
            "can be written, else the kernels folder of neardup's cache, ~/.cache/neardup "
            "or $NEARDUP_CACHE_DIR)"
        ),
    ] = None,
    if_stale: Annotated[
        bool,
        typer.Option(
            "--if-stale", help="do nothing where a module compiled from this source is in place"
        ),
    ] = False,
    probe_again: Annotated[
        bool,
        typer.Option(
            "--probe",
            help="learn the types by running small commands, and keep them in "
            "kernels/ahead_types.json (after a change of what a kernel is called with)",
        ),
    ] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the outcome as JSON")] = False,
    quiet: Annotated[
        bool, typer.Option("--quiet", "-q", help="no progress (a bar, or lines on a pipe)")
    ] = False,
) -> None:
    """Compile neardup's kernels ahead of time, so that small commands start no JIT.

    Every hot loop of neardup is a numba kernel, and starting numba costs each process
    0.5-0.8 CPU-s. This compiles each kernel at the types small commands (a scan, its
    reports, an add) call it with into a module that a command loads instead, until its
    first large call (about 40 s on 2 cores; scripts/setup.sh runs it). The types are kept
    with the source (kernels/ahead_types.json); --probe learns them again by running those
    commands on the JIT, as a build does where the kept ones no longer compile. After an
    edit of a kernel, or another Python or numpy, the module is not used until this runs
    again; the results are the same either way.

    Where PySpark and Java are installed, it also writes the class archive the Spark
    engine's driver JVM starts from (a small scan on Spark, about 190 MB in the same cache
    folder; a Spark session then starts in about half the CPU), once per Java runtime and
    PySpark release."""
    from neardup.cli.progress import RichProgress, show_progress
    from neardup.kernels import ahead
    from neardup.kernels.ahead_build import (
        TYPES,
        build,
        compile_exports,
        probed_exports,
        write_types,
    )

    started = time.perf_counter()
    if if_stale and ahead.loaded():
        where = next(f for f in ahead.folders() if (f / ahead.MANIFEST).exists())
        outcome = {"folder": str(where), "exports": len(ahead.loaded()), "built": False}
        classes = _spark_classes(quiet or json_out)
        _report(json_out, {**outcome, "spark_classes": classes})
        return
    if folder is None:
        folder = ahead.build_folder()
    say = (
        (lambda line: None)
        if json_out or quiet
        else (lambda line: console.print(line, highlight=False))
    )
    try:
        with (
            tempfile.TemporaryDirectory(prefix="neardup-kernels-") as work,
            RichProgress(enabled=show_progress(quiet)) as bar,
        ):
            shown: Progress = _Bar(bar) if bar.shown else _Silent() if quiet else _Lines()
            if probe_again:
                exports = probed_exports(probe_steps(), say, shown)
                write_types(TYPES, exports)
                count = compile_exports(folder, Path(work), exports, say, shown)
            else:
                count = build(folder, Path(work), probe_steps(), say, shown)
    except Exception as err:
        fail(f"the kernels could not be compiled ahead of time ({type(err).__name__}: {err})")
    outcome = {"folder": str(folder), "exports": count, "built": True}
    classes = _spark_classes(quiet or json_out)
    seconds = round(time.perf_counter() - started, 1)
    _report(json_out, {**outcome, "seconds": seconds, "spark_classes": classes})


def _spark_classes(quiet: bool) -> str | None:
    """The Spark driver JVM's class archive (`spark/jvm_archive.py`), written by a process
    of its own (`cli/spark_classes.py`) where PySpark and Java are installed and this Java
    runtime and PySpark have none (its name holds them: an archive in place is current).
    Its path, or None where there is none. A failure is a warning: Spark then starts
    without it, as before."""
    import subprocess

    from neardup.pipeline.executors.spark.jvm_archive import archive_path

    path = archive_path()
    if path is None or path.is_file():
        return str(path) if path is not None else None
    if not quiet:
        console.print("writing the Spark driver's class archive (a small scan on Spark)")
    done = subprocess.run(
        [sys.executable, "-m", "neardup.cli.spark_classes"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if done.returncode != 0 or not path.is_file():
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        console.print(f"[yellow]no Spark class archive: {last}[/yellow]", highlight=False)
        return None
    return str(path)


def _report(json_out: bool, outcome: dict[str, object]) -> None:
    if json_out:
        out_console.print_json(json.dumps(outcome))
        return
    done = "compiled" if outcome["built"] else "already current:"
    out_console.print(f"{done} {outcome['exports']} kernel exports in {outcome['folder']}")
    if outcome.get("spark_classes"):
        out_console.print(f"Spark driver's class archive: {outcome['spark_classes']}")
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    """Add this module's command to the `neardup` application."""
    app.command("precompile")(precompile_command)
