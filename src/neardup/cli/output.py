"""Where the command line prints, shared by `cli.py` and the command modules it registers
(which cannot import `cli.py`: it imports them)."""

from __future__ import annotations

import importlib
import re
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

console = Console(stderr=True)  # progress, errors
out_console = Console(soft_wrap=True)  # results: a long line is never cut or wrapped


def fail(message: str, code: int = 2) -> NoReturn:
    """Print an error (unwrapped, so paths stay copyable) and exit with `code`."""
    console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True, highlight=False)
    raise typer.Exit(code)


def require_extra(extra: str, command: str, *modules: str) -> None:
    """Stop with one line naming the extra to install when `command` needs a package that a
    plain `pip install neardup` leaves out (FastAPI and uvicorn come with `[service]`)."""
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            fail(f"`neardup {command}` needs {module}: pip install 'neardup[{extra}]'")


def to_terminal() -> bool:
    """Whether results go to a person (a terminal) rather than to a pipe or a file."""
    return out_console.is_terminal


def _cell(value: object) -> str:
    """A value as one TSV cell: complete, with tabs and line breaks turned into spaces."""
    if value is None:
        return ""
    text = value if isinstance(value, str) else str(value)
    return text.replace("\t", " ").replace("\r", " ").replace("\n", " ")


def _header(column: str) -> str:
    """A column's name on a pipe: lower case, words joined by `_` ("min sim" -> min_sim,
    "skip (prefix)" -> skip_prefix), so a script can name it; "#" is `rank`, since a line
    starting with "#" is a comment to TSV readers."""
    name = re.sub(r"[^0-9a-z]+", "_", column.lower()).strip("_")
    return name or "rank"


def emit_table(
    title: str,
    columns: list[str],
    rows: list[list[object]],
    right: frozenset[str] = frozenset(),
    terminal_rows: list[list[str]] | None = None,
    title_on_pipe: bool = False,
) -> None:
    """Print result rows: a Rich table on a terminal; elsewhere (a pipe, a file) plain
    tab-separated lines, a header line first, every value complete and never wrapped, so
    `grep`, `cut` and `sort` see whole URLs. `terminal_rows`, when given, are the formatted
    cells for the terminal (thousands separators and the like); `rows` hold the raw values.
    A command that prints several tables sets `title_on_pipe`: each block then starts with a
    `# title` line, which TSV readers skip as a comment."""
    if not to_terminal():
        lines = [f"# {title}"] if title_on_pipe else []
        lines.append("\t".join(_header(c) for c in columns))
        lines += ["\t".join(_cell(v) for v in row) for row in rows]
        print("\n".join(lines), flush=True)
        return
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in columns:
        if col in right:
            table.add_column(col, justify="right", no_wrap=True)
        else:
            table.add_column(col, overflow="fold")
    for row in terminal_rows if terminal_rows is not None else rows:
        table.add_row(*(escape(_cell(v)) for v in row))
    out_console.print(table)


def note(message: str) -> None:
    """A closing line for people (totals, files written); on a pipe it goes to stderr so
    the rows on stdout stay a clean table."""
    target = out_console if to_terminal() else console
    target.print(message, highlight=False, soft_wrap=True)
