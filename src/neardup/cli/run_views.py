"""The commands that read a finished run again: `neardup summary` and `neardup clusters`.

Why apart from `cli/scan.py`: they open a run's store and print it, and need none of the
scan's options, engines or progress; `scan.register` adds them to the same command group.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from neardup.cli.output import emit_table, fail, out_console
from neardup.cli.summary import print_summary
from neardup.store import RunError, load_summary, open_run


def summary_command(
    run: Annotated[Path, typer.Argument(help="run directory")],
    json_out: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
) -> None:
    """Print the summary of a finished scan again."""
    try:
        summary = load_summary(run)
    except RunError as err:
        fail(str(err))
    if json_out:
        out_console.print_json(json.dumps(summary, default=str))
    else:
        print_summary(summary, run)


CLUSTER_COLUMNS = ["cluster", "pages", "hosts", "texts", "min sim", "url", "title"]
MEMBER_COLUMNS = ["doc", "url", "host", "similarity", "role"]


def clusters_command(
    run: Annotated[Path, typer.Argument(help="run directory")],
    top: Annotated[int, typer.Option(help="how many clusters to list")] = 20,
    cluster: Annotated[int | None, typer.Option(help="list the pages of this cluster id")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print the rows as JSON")] = False,
) -> None:
    """The largest near-duplicate clusters, or the members of one cluster."""
    try:
        con = open_run(run)
    except RunError as err:
        fail(str(err))
    try:
        if cluster is None:
            rows = con.execute(
                "SELECT cluster_id, size, n_hosts, n_distinct_texts, min_similarity, "
                "representative_url, representative_title FROM clusters "
                "ORDER BY size DESC, cluster_id LIMIT ?",
                [top],
            ).fetchall()
            columns, title = CLUSTER_COLUMNS, f"largest near-duplicate clusters in {run}"
            shown = [[c, f"{n:,}", h, t, f"{m:.2f}", u, ti] for c, n, h, t, m, u, ti in rows]
        else:
            rows = con.execute(
                "SELECT doc_id, url, host, similarity_to_representative, "
                "CASE WHEN is_representative THEN 'representative' ELSE 'duplicate' END "
                "FROM pages WHERE cluster_id = ? ORDER BY NOT is_representative, doc_id",
                [cluster],
            ).fetchall()
            if not rows:
                fail(f"no cluster {cluster} in {run}")
            columns, title = MEMBER_COLUMNS, f"cluster {cluster}"
            shown = [[d, u, h, f"{sim:.3f}", role] for d, u, h, sim, role in rows]
    finally:
        con.close()
    if json_out:
        keys = [c.replace(" ", "_") for c in columns]
        out_console.print_json(json.dumps([dict(zip(keys, r, strict=True)) for r in rows]))
        return
    right = frozenset({"cluster", "pages", "hosts", "texts", "min sim", "doc", "similarity"})
    emit_table(title, columns, [list(r) for r in rows], right, shown)
