"""The `neardup` command line: the application and the registration of its commands.

Each command group lives in its own module with a `register(app)` function; this module only
assembles them (in the order `--help` lists them) and is the console entry point. `main`
wraps the application so that Ctrl-C, at any stage, ends with one line and status 130 (the
shell's convention for SIGINT), whether Python or DuckDB saw it first.
"""

from __future__ import annotations

import signal
import sys
from typing import Annotated

import typer

from neardup import __version__
from neardup.cli import crawls, demo, linkgraph, report, scan, service
from neardup.cli.output import console

# Help and usage errors are Click's plain text, not Rich panels: the panels give option names
# a column of their own that a narrow terminal cuts ("--max-shingle-…"), where plain help
# keeps every name whole and wraps only the descriptions.
app = typer.Typer(
    help="Find near-duplicate pages, mirrors and replicated collections in web crawls.",
    no_args_is_help=True,
    add_completion=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
)


def _show_version(value: bool) -> None:
    if value:
        print(f"neardup {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="print the version and exit", is_eager=True, callback=_show_version
        ),
    ] = False,
) -> None:
    """Find near-duplicate pages, mirrors and replicated collections in web crawls."""


for group in (scan, demo, linkgraph, report, crawls, service):
    group.register(app)


class _Interrupted(BaseException):
    """Ctrl-C, raised by our own SIGINT handler: not a KeyboardInterrupt, which the CLI
    library would turn into 'Aborted!' and status 1."""


def _on_sigint(signum: int, frame: object) -> None:
    raise _Interrupted


def main() -> None:
    """The console entry point: the app, with Ctrl-C turned into one line and status 130."""
    import duckdb

    signal.signal(signal.SIGINT, _on_sigint)
    try:
        app()
        return
    except (_Interrupted, KeyboardInterrupt, duckdb.InterruptException):
        pass
    except RuntimeError as err:  # DuckDB reports an interrupted query as a plain error
        if "interrupt" not in str(err).lower():
            raise
    console.print("interrupted; earlier outputs are left as they were", highlight=False)
    sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
