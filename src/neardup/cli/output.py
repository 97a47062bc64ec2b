"""Where the command line prints, shared by `cli.py` and the command modules it registers
(which cannot import `cli.py`: it imports them)."""

from __future__ import annotations

import importlib
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

console = Console(stderr=True)  # progress, errors
out_console = Console()  # results


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
