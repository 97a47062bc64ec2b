"""Where the command line prints, shared by `cli.py` and the command modules it registers
(which cannot import `cli.py`: it imports them)."""

from __future__ import annotations

import importlib
import re
from typing import Any, NoReturn

import typer
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderableType, RenderResult
from rich.markup import escape
from rich.measure import Measurement
from rich.text import Text

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


# A value that is a URL (a scheme, "://", no space): one line in a terminal table.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
# The narrowest a URL column gets, and the width a column of words keeps beside URLs.
_URL_MIN_WIDTH = 24
_TEXT_MIN_WIDTH = 16
_URL_LAST_WIDTH = 16  # what a URL column keeps, before the others shrink, when all cannot fit


def shorten_url(url: str, width: int) -> str:
    """`url` in at most `width` characters: whole when it fits, else its scheme and host, an
    ellipsis, and as much of the end of its path as fits (the part that tells pages of one
    site apart); a host too long for that keeps the start and the end of the whole URL."""
    if len(url) <= width:
        return url
    if width < 2:
        return "…"[:width]
    scheme, sep, rest = url.partition("://")
    head = scheme + sep + rest.split("/", 1)[0] if sep else ""
    room = width - 1  # the ellipsis takes one
    if head and room - len(head) >= min(8, room // 3):
        return head + "…" + url[len(url) - (room - len(head)) :]
    start = (room + 1) // 2
    return url[:start] + "…" + url[len(url) - (room - start) :]


class _UrlCell:
    """A URL in a terminal table: never wrapped (a URL cut over lines cannot be copied),
    shortened in the middle to the width its column gets."""

    def __init__(self, url: str) -> None:
        self.url = url

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(min(len(self.url), _URL_MIN_WIDTH), len(self.url))

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(shorten_url(self.url, options.max_width), no_wrap=True, overflow="crop")


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
    `# title` line, which TSV readers skip as a comment.

    On a terminal a URL stays on one line, shortened in the middle when its column is too
    narrow (`shorten_url`); no rows print "TITLE: none found" rather than an empty box.
    On a pipe no rows leave the header line alone, so a script sees the same columns."""
    if not to_terminal():
        lines = [f"# {title}"] if title_on_pipe else []
        lines.append("\t".join(_header(c) for c in columns))
        lines += ["\t".join(_cell(v) for v in row) for row in rows]
        print("\n".join(lines), flush=True)
        return
    if not rows:
        out_console.print(f"{escape(title)}: none found", highlight=False, soft_wrap=True)
        return
    from rich import box
    from rich.table import Table

    shown = terminal_rows if terminal_rows is not None else rows
    cells = [[_terminal_cell(v) for v in row] for row in shown]
    compact, widths = _layout(out_console.width, columns, cells, right)
    style: dict[str, Any] = (
        {"box": box.SIMPLE_HEAD, "show_edge": False, "pad_edge": False, "collapse_padding": True}
        if compact
        else {}
    )
    table = Table(title=title, title_justify="left", **style)
    for col, width, kind in zip(columns, widths, _kinds(columns, cells, right), strict=True):
        if kind == "figure":
            table.add_column(col, justify="right", no_wrap=True)
        elif kind == "url":
            table.add_column(col, no_wrap=True, width=width)
        else:
            table.add_column(col, overflow="fold", width=width)
    for row in cells:
        table.add_row(*row)
    out_console.print(table)


def _kinds(
    columns: list[str], cells: list[list[RenderableType]], right: frozenset[str]
) -> list[str]:
    """Each column's kind: "figure" (right-aligned, never narrowed), "url" (a column with a
    URL: never wrapped, shortened in the middle) or "text" (words, wrapped)."""
    return [
        "figure"
        if column in right
        else "url"
        if any(isinstance(row[i], _UrlCell) for row in cells)
        else "text"
        for i, column in enumerate(columns)
    ]


def _layout(
    width: int, columns: list[str], cells: list[list[RenderableType]], right: frozenset[str]
) -> tuple[bool, list[int | None]]:
    """(compact, the width of each column) for a terminal table `width` wide.

    A table that fits keeps Rich's boxed layout and widths (None). One that does not is
    planned here, because Rich narrows every column alike: a URL shortened to a few
    characters, a host or a word cut in pieces. Figures keep their whole width; every other
    column gets first its floor (a URL column `_URL_MIN_WIDTH`, a column of words its
    longest word up to `_TEXT_MIN_WIDTH`, see `_word_floor`), then the rest
    in proportion to what it lacks. When the floors do not fit in the box, the table drops
    its vertical lines (two characters between columns instead of three), and when they do
    not fit even then, URL columns give way first, down to `_URL_LAST_WIDTH`, then all alike."""
    kinds = _kinds(columns, cells, right)
    natural = [
        max([cell_len(column), *(_cell_width(row[i]) for row in cells)])
        for i, column in enumerate(columns)
    ]
    floor = [
        natural[i]
        if kind == "figure"
        else min(natural[i], _URL_MIN_WIDTH)
        if kind == "url"
        else min(natural[i], _word_floor(cells, i))
        for i, kind in enumerate(kinds)
    ]
    flexible = [i for i, kind in enumerate(kinds) if kind != "figure"]
    fixed = sum(natural[i] for i, kind in enumerate(kinds) if kind == "figure")
    n = len(columns)
    for compact, frame in ((False, 3 * n + 1), (True, 2 * (n - 1))):
        room = width - frame - fixed
        if sum(natural[i] for i in flexible) <= room:
            return compact, [None] * n
        if sum(floor[i] for i in flexible) <= room:
            break
    widths: list[int | None] = [None] * n
    # Too narrow even then: URL columns, which shorten gracefully, give way first.
    for i in flexible:
        excess = sum(floor[j] for j in flexible) - room
        if kinds[i] == "url" and excess > 0:
            floor[i] -= min(excess, max(0, floor[i] - _URL_LAST_WIDTH))
    floors = sum(floor[i] for i in flexible)
    if floors >= room:
        for i in flexible:
            widths[i] = max(4, floor[i] * room // floors)
        return compact, widths
    spare, lacking = room - floors, sum(natural[i] - floor[i] for i in flexible)
    for i in flexible:
        widths[i] = floor[i] + spare * (natural[i] - floor[i]) // lacking
    return compact, widths


def _word_floor(cells: list[list[RenderableType]], i: int) -> int:
    """The floor of column `i` of words: its longest word up to `_TEXT_MIN_WIDTH`, or up to
    `_URL_MIN_WIDTH` when every value is one word (a host, a role), which wrapping would
    cut in pieces."""
    longest = max(_longest_word(row[i]) for row in cells)
    one_word = all(len(str(row[i]).split()) <= 1 for row in cells)
    return min(longest, _URL_MIN_WIDTH if one_word else _TEXT_MIN_WIDTH)


def _cell_width(cell: RenderableType) -> int:
    return len(cell.url) if isinstance(cell, _UrlCell) else cell_len(str(cell))


def _longest_word(cell: RenderableType) -> int:
    if isinstance(cell, _UrlCell):
        return len(cell.url)
    return max((cell_len(word) for word in str(cell).split()), default=0)


def _terminal_cell(value: object) -> RenderableType:
    """A value as a terminal table cell: a URL as `_UrlCell`, anything else as text."""
    text = _cell(value)
    return _UrlCell(text) if _URL.fullmatch(text) else escape(text)


def note(message: str) -> None:
    """A closing line for people (totals, files written); on a pipe it goes to stderr so
    the rows on stdout stay a clean table."""
    target = out_console if to_terminal() else console
    target.print(message, highlight=False, soft_wrap=True)
