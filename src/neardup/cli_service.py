"""Command-line commands for the service work (registered by `cli.py`)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `neardup` application."""
