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
from typing import Annotated

import typer

from neardup.cli.output import console, fail, out_console


def probe(work: Path) -> None:
    """What small commands run, in this process (one worker), so that the build learns the
    types they call the kernels with: a generated crawl's WARCs scanned (request-first
    records, revisits, redirects), the run's reports and deduplicated copy, one JSONL record
    scanned, and an index built from the record with a WARC added."""
    from neardup.cli.main import build_app

    app = build_app()

    def run(*args: str) -> None:
        app(list(args), standalone_mode=False)

    crawl, one = work / "crawl", work / "one.jsonl"
    one.write_text(
        '{"url": "https://example.org/a", "text": "one page of text, with words enough '
        'to make a few shingles of it and a signature"}\n'
    )
    with contextlib.redirect_stdout(io.StringIO()):  # the commands' own reports
        run("demo-crawl", str(crawl), "--pages", "12")
        warcs = sorted(str(p) for p in (crawl / "warc").glob("*.warc.gz"))
        run("scan", *warcs, "--out", str(work / "run"), "--workers", "1", "-q")
        for command in ("clusters", "mirrors", "collections"):
            run(command, str(work / "run"), "--json")
        run("dedup", "--run", str(work / "run"), "--out", str(work / "clean"), "-q")
        run("scan", str(one), "--out", str(work / "one"), "--workers", "1", "-q")
        run("add", str(work / "index"), str(one), "--json")
        run("add", str(work / "index"), warcs[0], "--json")


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
    json_out: Annotated[bool, typer.Option("--json", help="print the outcome as JSON")] = False,
) -> None:
    """Compile neardup's kernels ahead of time, so that small commands start no JIT.

    Every hot loop of neardup is a numba kernel, and starting numba costs each process
    0.5-0.8 CPU-s. This runs small commands once (a scan, its reports, an add) to learn the
    types they call the kernels with, and compiles those into a module that a command loads
    instead, until its first large call (scripts/setup.sh runs it; about a minute). After an
    edit of a kernel, or another Python or numpy, the module is not used until this runs
    again; the results are the same either way."""
    from neardup.kernels import ahead
    from neardup.kernels.ahead_build import build

    started = time.perf_counter()
    if if_stale and ahead.loaded():
        where = next(f for f in ahead.folders() if (f / ahead.MANIFEST).exists())
        _report(json_out, {"folder": str(where), "exports": len(ahead.loaded()), "built": False})
        return
    if folder is None:
        folder = ahead.build_folder()
    say = (lambda line: None) if json_out else (lambda line: console.print(line, highlight=False))
    try:
        with tempfile.TemporaryDirectory(prefix="neardup-kernels-") as work:
            count = build(folder, Path(work), probe, say)
    except Exception as err:
        fail(f"the kernels could not be compiled ahead of time ({type(err).__name__}: {err})")
    seconds = round(time.perf_counter() - started, 1)
    _report(json_out, {"folder": str(folder), "exports": count, "built": True, "seconds": seconds})


def _report(json_out: bool, outcome: dict[str, object]) -> None:
    if json_out:
        out_console.print_json(json.dumps(outcome))
        return
    done = "compiled" if outcome["built"] else "already current:"
    out_console.print(f"{done} {outcome['exports']} kernel exports in {outcome['folder']}")
    sys.stdout.flush()


def register(app: typer.Typer) -> None:
    """Add this module's command to the `neardup` application."""
    app.command("precompile")(precompile_command)
