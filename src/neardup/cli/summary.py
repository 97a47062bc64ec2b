"""The end-of-scan summary, for people (a table) and for scripts (`key<TAB>value` lines),
and the one line that says why a scan found nothing to compare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.table import Table

from neardup.cli.output import out_console, to_terminal
from neardup.pipeline.stages import STAGES

# The order of `stage_seconds` for people: the Spark engine's session start, the shared
# stages in the order they run (`STAGES`), the Spark executors writing the tables, the store.
_STAGE_ORDER = ("spark", *(stage.key for stage in STAGES), "tables", "store")


def in_order(summary: dict[str, Any]) -> dict[str, Any]:
    """`summary` with its skip reasons from the commonest down (ties by name, as the store's
    `skipped.sql` counts them) and its stage times in the order the stages run. A scan's
    own summary has both orders already; one read back from `summary.json` has its keys
    sorted, so `summary` and `scan` print the same through this one function."""
    skipped = summary.get("skipped_by_reason") or {}
    stages = summary.get("stage_seconds") or {}
    rank = {key: i for i, key in enumerate(_STAGE_ORDER)}
    return {
        **summary,
        "skipped_by_reason": dict(sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0]))),
        "stage_seconds": {
            k: stages[k] for k in sorted(stages, key=lambda k: rank.get(k, len(rank)))
        },
    }


def print_summary(summary: dict[str, Any], path: Path) -> None:
    """The summary of a scan, for `scan` and `summary` alike: a table on a terminal; on a
    pipe or in a file one `key<TAB>value` line per figure, raw, keys in alphabetical order
    with the skips and stage times (`skipped_by_reason.REASON`, `stage_seconds.STAGE`) in
    the table's order at their group's place, and an empty value where a figure does not
    apply (`containment_pairs` without --containment), never `None`."""
    summary = in_order(summary)
    if to_terminal():
        _print_summary_table(summary, path)
        return
    lines = []
    for key in sorted(summary):
        value = summary[key]
        if key in ("skipped_by_reason", "stage_seconds"):
            lines += [f"{key}.{k}\t{v}" for k, v in value.items()]
        elif not isinstance(value, dict | list):
            lines.append(f"{key}\t{'' if value is None else value}")
    print("\n".join(lines), flush=True)


def _print_summary_table(summary: dict[str, Any], path: Path) -> None:
    sketched = summary["sketched"] or 0
    table = Table(title=f"neardup scan → {path}", show_header=False, title_justify="left")
    table.add_column("what", no_wrap=True)  # a figure's name on one line; values wrap
    table.add_column("value", justify="right")
    table.add_row("records read", f"{summary['records']:,}")
    table.add_row("pages sketched", f"{sketched:,}")
    for reason, count in summary.get("skipped_by_reason", {}).items():
        table.add_row(f"  skipped: {reason}", f"{count:,}")
    table.add_row("exact duplicates (same payload)", f"{sketched - summary['distinct_payloads']:,}")
    table.add_row("lexically equivalent (same words)", f"{sketched - summary['distinct_texts']:,}")
    table.add_row("shingle-equivalent", f"{sketched - summary['distinct_shingle_sets']:,}")
    table.add_row(
        "candidate pairs / verified",
        f"{summary['candidate_pairs']:,} / {summary['verified_pairs']:,}",
    )
    if summary.get("containment_pairs") is not None:
        table.add_row("contained-in pairs", f"{summary['containment_pairs']:,}")
    stats = summary.get("method_stats") or {}
    if "false_positives" in stats and stats.get("join") == "iceberg":
        table.add_row(
            "iceberg: rows / candidates / false positives",
            f"{stats['materialised_rows']:,} / {stats['candidates']:,} / "
            f"{stats['false_positives']:,}",
        )
    table.add_row("near-duplicate clusters (size ≥ 2)", f"{summary['clusters']:,}")
    table.add_row("pages in those clusters", f"{summary['pages_in_clusters']:,}")
    share = summary["duplicates"] / sketched if sketched else 0.0
    table.add_row("duplicates (not representatives)", f"{summary['duplicates']:,} ({share:.1%})")
    table.add_row("largest cluster", f"{summary['largest_cluster']:,}")
    for stage, seconds in summary.get("stage_seconds", {}).items():
        table.add_row(f"  time: {stage}", f"{seconds:.1f}s")
    rate = summary.get("records_per_second")
    table.add_row(
        "total", f"{summary['elapsed_seconds']:.1f}s ({rate:,.0f} records/s)" if rate else ""
    )
    out_console.print(table)


def why_nothing(rows: list[tuple[str, str]] | None) -> str:
    """Each input's commonest real skip reason, naming the file (`pageless_inputs`' rows of
    the run): what a user needs to see when a scan found nothing to compare (the rows
    themselves are in the run's `pages`)."""
    if rows is None:
        return "see the run's pages table"
    return "; ".join(f"{src}: {why}" for src, why in rows) or "no records"


def unusable_inputs(rows: list[tuple[str, str]] | None, shown: int = 5) -> str | None:
    """One line naming the inputs that gave no page, each with its commonest real reason,
    when others did (`pageless_inputs`' rows of the run, WAT files left out: they hold links
    and never pages): a damaged or empty file among good ones, which the summary's counts by
    reason do not name."""
    if not rows:
        return None
    named = "; ".join(f"{src}: {why}" for src, why in rows[:shown])
    more = (
        f"; and {len(rows) - shown} more (see the run's pages table)" if len(rows) > shown else ""
    )
    return f"no page could be read from {len(rows)} input(s): {named}{more}"
