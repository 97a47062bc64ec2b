"""The `neardup` command line: the application and the registration of its commands.

Each command group lives in its own module with a `register(app)` function; this module only
assembles them (in the order `--help` lists them) and is the console entry point.
"""

from __future__ import annotations

import typer

from neardup.cli import crawls, demo, linkgraph, report, scan, service

app = typer.Typer(
    help="Find near-duplicate pages, mirrors and replicated collections in web crawls.",
    no_args_is_help=True,
    add_completion=False,
)

for group in (scan, demo, linkgraph, report, crawls, service):
    group.register(app)


if __name__ == "__main__":  # pragma: no cover
    app()
