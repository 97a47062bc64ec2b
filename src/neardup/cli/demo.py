"""The `demo-crawl` command: a synthetic crawl with known answers, to try neardup on
(registered by `main.py`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from neardup.cli.output import fail, out_console
from neardup.store.outputs import OutputError


def demo_crawl_command(
    out: Annotated[Path, typer.Argument(help="directory to write the crawl into")],
    pages: Annotated[int, typer.Option(help="documents on the primary site")] = 250,
    seed: Annotated[int, typer.Option(help="random seed (same seed, same bytes)")] = 0,
    force: Annotated[
        bool, typer.Option(help="replace an earlier demo crawl in OUT (never other files)")
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="print what was written as JSON")
    ] = False,
) -> None:
    """Write a generated crawl to try neardup on, with its ground truth.

    Generated offline: several hosts with mirrors, stale and partial copies, aliases,
    unrelated pages, redirects, errors and revisits."""
    from neardup.synth import generate_demo_crawl

    try:
        crawl = generate_demo_crawl(out, n_docs=pages, seed=seed, force=force)
    except (OutputError, ValueError) as err:
        fail(str(err))
    if json_out:
        files = [str(p) for p in crawl.warc_paths]
        payload = {"out": str(out), "warc_records": crawl.warc_records, "warc_files": files}
        out_console.print_json(json.dumps({**payload, "truth": str(out / "truth.csv")}))
        return
    out_console.print(
        f"wrote {crawl.warc_records:,} WARC records in {len(crawl.warc_paths)} files under "
        f"{out / 'warc'} ({crawl.seconds:.1f}s); truth in {out / 'truth.csv'}"
    )


def register(app: typer.Typer) -> None:
    """Add this module's command to the `neardup` application."""
    app.command("demo-crawl")(demo_crawl_command)
