"""The `neardup` command line: the application and the registration of its commands.

Each command group lives in its own module with a `register(app)` function; this module only
assembles them (in the order `--help` lists them) and is the console entry point. `main`
wraps the application so that Ctrl-C, at any stage, ends with one line and status 130 (the
shell's convention for SIGINT), whether Python or DuckDB saw it first.

A group's module imports the part of the library its commands use (the crawl store, the
service, the report's plotting), and all of them together take a good part of a second, so
`main` registers only the group of the command its line names (`COMMAND_GROUPS`); a line
that names none (`--help`, a misspelt command, shell completion) gets them all, and
`--version` alone none.
`app`, the whole application, is built on first use, for callers such as tests.

Help is Click's plain text (see `build_app`), with two changes made here once for every
command: `neardup --help` lists the commands under headings (`HELP_PANELS`, set as each
command's `rich_help_panel`) with each one's first sentence whole, where Click cut them at
45 characters with "..."; and a usage line names arguments as Click does (`INPUTS...`,
`[URL]`), where Typer writes `{inputs}...`.
"""

from __future__ import annotations

import importlib
import itertools
import os
import re
import signal
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup

from neardup import __version__
from neardup.cli.output import console
from neardup.startup import one_blas_thread, without_probed_modules

if TYPE_CHECKING:  # typer>=0.26 formats help with its own copy of Click, not named publicly
    from typer._click.formatting import HelpFormatter

GROUPS = ("scan", "demo", "linkgraph", "report", "crawls", "service", "kernels")  # `--help`'s order

# The command names each group's `register` adds (checked against the groups by the tests).
COMMAND_GROUPS: dict[str, str] = {
    **dict.fromkeys(("scan", "summary", "clusters", "dedup"), "scan"),
    "demo-crawl": "demo",
    **dict.fromkeys(("collections", "mirrors", "avoid-list", "rollup"), "linkgraph"),
    **dict.fromkeys(("report", "ui"), "report"),
    **dict.fromkeys(("crawl", "evolution", "find-moved", "query"), "crawls"),
    **dict.fromkeys(("serve", "add"), "service"),
    "precompile": "kernels",
}


# The headings of `neardup --help`, in their order, with their commands in theirs; every
# command of `COMMAND_GROUPS` is under exactly one (checked by the tests).
HELP_PANELS: dict[str, tuple[str, ...]] = {
    "Find duplicates": ("scan", "dedup", "demo-crawl"),
    "Look at a run": ("summary", "clusters", "report", "ui"),
    "Hosts and collections": ("mirrors", "collections", "avoid-list", "rollup"),
    "Crawls over time": ("crawl", "evolution", "find-moved", "query"),
    "Index and service": ("add", "serve"),
    "Set-up": ("precompile",),
}
_PANEL_OF = {name: panel for panel, names in HELP_PANELS.items() for name in names}


def _first_sentence(command: TyperCommand | TyperGroup) -> str:
    """A command's description for the list of commands: its short help, else the first
    sentence of its help, whole (where Click cuts it at 45 characters)."""
    if command.short_help:
        return command.short_help
    words = " ".join((command.help or "").split("\n\n")[0].split())
    end = re.search(r"\.(\s|$)", words)
    return words[: end.start() + 1] if end else words


def _argument_name(param: TyperArgument) -> str:
    """An argument as Click names it in a usage line: upper case, `[...]` when optional,
    `...` when it takes several values."""
    name = (param.metavar or param.name or "").upper()
    if not param.required:
        name = f"[{name}]"
    return name + ("..." if param.nargs != 1 else "")


class _Command(TyperCommand):
    """A command whose usage line and Arguments section name arguments in Click's way."""

    def collect_usage_pieces(self, ctx: typer.Context) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        params = self.get_params(ctx)
        return pieces + [_argument_name(p) for p in params if p.param_type_name == "argument"]

    def format_options(self, ctx: typer.Context, formatter: HelpFormatter) -> None:
        arguments, options = [], []
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append((_argument_name(param), record[1]))
            else:
                options.append(record)
        for title, rows in (("Arguments", arguments), ("Options", options)):
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)


class _Group(TyperGroup):
    """The application: its commands listed under their `rich_help_panel` headings, in
    `HELP_PANELS`' order, each with its first sentence whole (wrapped, never cut)."""

    def format_commands(self, ctx: typer.Context, formatter: HelpFormatter) -> None:
        panels: dict[str, list[tuple[str, str]]] = {}
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is None or command.hidden:
                continue
            panel = getattr(command, "rich_help_panel", None) or "Commands"
            panels.setdefault(panel, []).append((name, _first_sentence(command)))
        if not panels:
            return
        known = list(HELP_PANELS)
        place = {name: i for i, name in enumerate(_PANEL_OF)}
        width = max(len(name) for rows in panels.values() for name, _ in rows)
        for panel in sorted(panels, key=lambda p: known.index(p) if p in known else len(known)):
            rows = sorted(panels[panel], key=lambda row: place.get(row[0], len(place)))
            with formatter.section(panel):
                # names padded to the longest of all: one column of descriptions throughout
                formatter.write_dl([(name.ljust(width), text) for name, text in rows])


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
        cls=_Group,
    )
    app.callback()(_root)
    for name in groups:
        importlib.import_module(f"neardup.cli.{name}").register(app)
    for info in app.registered_commands:
        if info.cls in (None, TyperCommand):  # Typer's default: no class of the command's own
            info.cls = _Command
        info.rich_help_panel = info.rich_help_panel or _PANEL_OF.get(info.name or "")
    return app


def groups_for(args: Sequence[str]) -> tuple[str, ...]:
    """The groups a command line (without the program name) needs: its command's, none for
    `--version` alone, or all of them when it names no known command first or the shell
    asks for completions."""
    completing = any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ)
    if list(args) == ["--version"] and not completing:
        return ()
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


def _leave_now(code: int) -> NoReturn:
    """End the process without Python's teardown, once `neardup add` is done: its index is
    committed (each batch made durable, the writer lock released) and its report printed,
    so nothing is left to flush but the standard streams. The teardown (numba's compiled
    kernels, Arrow, the modules) took 0.35 s, a tenth of a 1 % increment of a
    million-page index. Only from the console entry point: a test's runner calls the app
    in its own process."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _on_spark(args: list[str]) -> bool:
    """Whether a command line asks for the Spark engine (`--engine spark`)."""
    pairs = itertools.pairwise(args)  # each word and the next
    return "--engine=spark" in args or ("--engine", "spark") in pairs


def main() -> None:
    """The console entry point: the app, with Ctrl-C turned into one line and status 130."""
    signal.signal(signal.SIGINT, _on_sigint)
    one_blas_thread()  # numpy's threads spin at its import; no command calls BLAS
    adding = sys.argv[1:2] == ["add"]
    if adding:
        # Arrow's tables on the C library's allocator, not its bundled mimalloc: for `add`
        # that gave 2.00-2.30 s against 2.70-3.09 s for a 1 % increment of a million-page
        # index (the same page faults, half the system time: 0.5 against 1.2-1.5 s, runs
        # interleaved), and 111 s and 1.46 KiB a page against 117 s and 1.48 for a million
        # pages into an empty index. Read when pyarrow loads, which this module does not do;
        # a user's own choice of pool stays.
        os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
    if not _on_spark(sys.argv[2:]):
        without_probed_modules()  # PySpark's Arrow exchange needs pandas: not on Spark
    app = build_app(groups_for(sys.argv[1:]))
    try:
        app()
        return
    except SystemExit as done:
        if adding and isinstance(done.code, int | None):
            _leave_now(done.code or 0)
        raise
    except (_Interrupted, KeyboardInterrupt, Exception) as err:
        if not _is_interrupt(err):
            raise
    console.print("interrupted; earlier outputs are left as they were", highlight=False)
    sys.exit(130)


if __name__ == "__main__":  # pragma: no cover
    main()
