"""The `neardup` command line: the application and the registration of its commands.

Each command group lives in its own module with a `register(app)` function; this module only
assembles them (in the order `--help` lists them) and is the console entry point. `main`
wraps the application so that Ctrl-C, at any stage, ends with one line and status 130 (the
shell's convention for SIGINT), whether Python or DuckDB saw it first.

A group's module imports the part of the library its commands use (the crawl store, the
service, the report's plotting), and all of them together take a good part of a second, so
`main` registers only the group of the command its line names (`COMMAND_GROUPS`); a line
that names none (`--help`, `--version`, a misspelt command, shell completion) gets them all.
`app`, the whole application, is built on first use, for callers such as tests.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
from collections.abc import Sequence
from typing import Annotated, Any

import typer

from neardup import __version__
from neardup.cli.output import console

GROUPS = ("scan", "demo", "linkgraph", "report", "crawls", "service")  # `--help`'s order

# The command names each group's `register` adds (checked against the groups by the tests).
COMMAND_GROUPS: dict[str, str] = {
    **dict.fromkeys(("scan", "summary", "clusters", "dedup"), "scan"),
    "demo-crawl": "demo",
    **dict.fromkeys(("collections", "mirrors", "avoid-list", "rollup"), "linkgraph"),
    **dict.fromkeys(("report", "ui"), "report"),
    **dict.fromkeys(("crawl", "evolution", "find-moved", "query"), "crawls"),
    **dict.fromkeys(("serve", "add"), "service"),
}


def _show_version(value: bool) -> None:
    if value:
        print(f"neardup {__version__}")
        raise typer.Exit()


def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="print the version and exit", is_eager=True, callback=_show_version
        ),
    ] = False,
) -> None:
    """Find near-duplicate pages, mirrors and replicated collections in web crawls."""


def build_app(groups: Sequence[str] = GROUPS) -> typer.Typer:
    """The application with the commands of `groups` (module names under `neardup.cli`)."""
    # Help and usage errors are Click's plain text, not Rich panels: the panels give option
    # names a column of their own that a narrow terminal cuts ("--max-shingle-…"), where
    # plain help keeps every name whole and wraps only the descriptions.
    app = typer.Typer(
        help="Find near-duplicate pages, mirrors and replicated collections in web crawls.",
        no_args_is_help=True,
        add_completion=True,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 120},
    )
    app.callback()(_root)
    for name in groups:
        importlib.import_module(f"neardup.cli.{name}").register(app)
    return app


def groups_for(args: Sequence[str]) -> tuple[str, ...]:
    """The groups a command line (without the program name) needs: its command's, or all
    of them when it names no known command first or the shell asks for completions."""
    completing = any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)
    group = COMMAND_GROUPS.get(args[0]) if args and not completing else None
    return (group,) if group else GROUPS


def __getattr__(name: str) -> Any:
    """`app`: the application with every command, built on first use."""
    if name != "app":
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    app = build_app()
    globals()["app"] = app
    return app


class _Interrupted(BaseException):
    """Ctrl-C, raised by our own SIGINT handler: not a KeyboardInterrupt, which the CLI
    library would turn into 'Aborted!' and status 1."""


def _on_sigint(signum: int, frame: object) -> None:
    raise _Interrupted


def _is_interrupt(err: BaseException) -> bool:
    """Whether `err` is Ctrl-C as Python or DuckDB reports it. DuckDB is not imported for
    the question: a command that never loaded it cannot have been interrupted inside it."""
    if isinstance(err, (_Interrupted, KeyboardInterrupt)):
        return True
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None and isinstance(err, duckdb.InterruptException):
        return True
    # DuckDB reports an interrupted query as a plain error
    return isinstance(err, RuntimeError) and "interrupt" in str(err).lower()


def main() -> None:
    """The console entry point: the app, with Ctrl-C turned into one line and status 130."""
    signal.signal(signal.SIGINT, _on_sigint)
    app = build_app(groups_for(sys.argv[1:]))
    try:
        app()
        return
    except (_Interrupted, KeyboardInterrupt, Exception) as err:
        if not _is_interrupt(err):
            raise
    console.print("interrupted; earlier outputs are left as they were", highlight=False)
    sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
