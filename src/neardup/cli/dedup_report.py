"""What `neardup dedup` prints: totals, then one row per input file, so that every input is
accounted for.

A file is written (its records kept and removed), left out (it holds nothing to deduplicate:
a WAT file's metadata), or not written (a failure, with its reason). Whatever is not plainly
written is also named on stderr, where a script or a person who reads only the messages
sees it: `note:` for a copy whose form changed, `left out:` for a file with nothing to
deduplicate, `not written:` for a failure. Only failures change the exit status, since a WAT
given beside its WET is no error.
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.markup import escape

from neardup.cli.output import console, emit_table, out_console
from neardup.pipeline.dedup import DedupResult, FileOutcome


def report_dedup(result: DedupResult, out: Path, json_out: bool) -> None:
    """Print the outcome of `dedup` (`--json`: one object, `files` with every input) and
    end with its exit status: 0 when every file was written or left out by design, 3 when
    some could not be written and others were, 1 when no copy was written at all."""
    if json_out:
        out_console.print_json(
            json.dumps(
                {
                    "out": str(out),
                    "kept": result.kept,
                    "removed": result.removed,
                    "companions_removed": result.companions_removed,
                    "files": [o.to_dict() for o in result.outcomes],
                }
            )
        )
    else:
        rows: list[list[object]] = [
            ["pages kept", result.kept],
            ["pages removed (near-duplicates)", result.removed],
            ["companion records removed", result.companions_removed],
            *(_row(o) for o in result.outcomes),
            ["lists", "keep_urls.txt, remove_urls.txt, kept.parquet, removed.parquet"],
        ]
        emit_table(f"neardup dedup → {out}", ["what", "value"], rows)
    for label, by_file in (
        ("note:", result.notes),
        ("left out:", result.left_out),
        ("[bold red]not written:[/]", result.not_written),
    ):
        for source, why in by_file.items():
            console.print(
                f"{label} {escape(source)}: {escape(why)}", highlight=False, soft_wrap=True
            )
    if result.not_written or not result.files:
        raise typer.Exit(3 if result.files else 1)


def _row(o: FileOutcome) -> list[object]:
    """One input file's row of the table."""
    if o.output is not None:
        return [
            f"written: {o.source}",
            f"{o.output} ({o.records_kept} kept, {o.records_removed} removed)",
        ]
    return [f"{'left out' if o.left_out else 'not written'}: {o.source}", o.reason]
