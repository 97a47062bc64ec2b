"""Command-line commands for the HTML report and the web UI (registered by `cli.py`)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `neardup` application."""
