"""`scan`: the whole pipeline from input files to a finished run directory.

ingest -> sketch -> near-duplicate pairs -> clusters -> store. The stages up to the clusters
run in the shared order of `neardup.pipeline.stages`, each implemented by an engine (embedded
by default, or Spark); they exchange Parquet files in a staging directory next to the
output, from which the store is built here. The finished
directory replaces the output in one rename, so an interrupted scan never leaves a
half-written run.

What a finished run says about its inputs is read here too, for the end of a scan
(`input_problems`, in one connection): which inputs are damaged or cut short and why an
input gave no page (`pageless_inputs`, by its commonest real skip reason).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from neardup.config import Settings
from neardup.ingest import detect_input_kind
from neardup.ingest.paths_file import resolve_inputs
from neardup.pipeline.executors import ScanEngine, engine_named
from neardup.pipeline.executors.base import StagesOutcome
from neardup.pipeline.executors.local import run_apart
from neardup.pipeline.progress import Progress, SilentProgress, Unit
from neardup.pipeline.stages import run_stages
from neardup.pipeline.steps.ingest import drop_text
from neardup.store import RunError, anchor_views, build_store, open_run
from neardup.store.outputs import check_folder, marker_kind, replacing_folder

if TYPE_CHECKING:
    import duckdb


@dataclass
class ScanResult:
    """Where the run is and what it found (the same figures as `summary.json`)."""

    path: Path
    summary: dict[str, Any] = field(default_factory=dict)

    @property
    def stage_seconds(self) -> dict[str, float]:
        return self.summary.get("stage_seconds", {})


class EmptyScanError(RuntimeError):
    """A scan that read no usable page, where a run already stands: it is not published."""

    def __init__(self, message: str, summary: dict[str, Any]) -> None:
        super().__init__(message)
        self.summary = summary


T = TypeVar("T")

# Records from which the embedded engine builds the store in a process of its own: below,
# starting one (its imports: DuckDB, Arrow, about 0.5 CPU-s) costs about what the build does.
STORE_APART_RECORDS = 20_000


def _store_apart(outcome: StagesOutcome) -> bool:
    """Whether the store is built in a worker process (`run_apart`): a large run on the
    embedded engine with workers. The Spark engine's store is views over its datasets."""
    return (
        outcome.engine == "embedded"
        and outcome.workers > 1
        and outcome.records >= STORE_APART_RECORDS
    )


def _in_this_process(fn: Callable[..., T], *args: Any) -> T:
    return fn(*args)


def scan(
    inputs: list[str | Path],
    out: str | Path,
    settings: Settings | None = None,
    workers: int | None = None,
    base_url: str | None = None,
    force: bool = False,
    progress: Progress | None = None,
    engine: str | ScanEngine = "embedded",
    sample: int | None = None,
    shard: str | None = None,
    paths_base: str | None = None,
) -> ScanResult:
    """Find near-duplicate clusters in `inputs` (WARC/ARC files, HTML folders, JSONL or
    Parquet tables; URLs, `-` for stdin, or paths files such as Common Crawl's
    `warc.paths.gz`) and write a run directory at `out`.

    A paths file stands for the files it lists, joined to `paths_base` (Common Crawl's data
    host by default); `sample` keeps N of them and `shard` ("i/n") every n-th from the i-th,
    as `neardup scan --sample/--shard` do, through the same `resolve_inputs`. A bad paths
    file or selection raises `PathsFileError` (a ValueError) before any work.

    `engine` is 'embedded' (local processes, the default), 'spark' (a local Spark session;
    see `neardup.pipeline.executors.spark.SparkEngine` for a cluster) or an engine object. Every
    engine writes the same tables for the same inputs and settings."""
    settings = settings or Settings()
    progress = progress or SilentProgress()
    paths = resolve_inputs([str(p) for p in inputs], paths_base, sample, shard)
    if not paths:
        raise ValueError("no input given")
    runner = engine_named(engine, workers) if isinstance(engine, str) else engine
    for path in paths:
        if "://" not in path or runner.name != "spark":  # Spark opens its own URIs
            detect_input_kind(path)  # fails early, before any work, on an unreadable input
    out = Path(out)
    check_folder(out, "run", paths, force)  # refuse before any work
    times: dict[str, float] = {}
    started = time.perf_counter()

    @contextmanager
    def stage(
        key: str, label: str, total: int | None = None, unit: Unit = "items"
    ) -> Iterator[None]:
        """Time a stage and show it as one progress bar."""
        t = time.perf_counter()
        progress.stage(label, total, unit)
        yield
        progress.done()
        times[key] = time.perf_counter() - t

    with replacing_folder(out, "run", paths, force) as staging:
        outcome = run_stages(runner, paths, staging, settings, base_url, stage, progress)
        if not settings.keep_text:
            drop_text(staging)  # read by a stage (exact verification, say), not kept
        with stage("store", "store"):
            build = run_apart if _store_apart(outcome) else _in_this_process
            summary = build(build_store, staging, settings, outcome.workers)

        elapsed = time.perf_counter() - started
        summary.update(
            {
                "inputs": paths,
                "engine": outcome.engine,
                "formats": dict(outcome.formats),
                "common_shingle_filter": "count" in times,
                "candidate_method": settings.method,
                "bands": outcome.bands,
                "rows_per_band": outcome.rows_per_band,
                "candidate_pairs": outcome.candidates,
                "candidate_pairs_emitted": outcome.candidates_emitted,
                "large_buckets": outcome.large_buckets,
                "verified_pairs": outcome.verified_pairs,
                "method_stats": outcome.method_stats,
                "containment_pairs": (
                    outcome.containment_rows if settings.containment is not None else None
                ),
                "pairs_rows": outcome.pairs_rows,
                "stage_seconds": {k: round(v, 3) for k, v in times.items()},
                "elapsed_seconds": round(elapsed, 3),
                "records_per_second": round(outcome.records / elapsed, 1) if elapsed else None,
            }
        )
        summary = {k: (int(v) if isinstance(v, np.integer) else v) for k, v in summary.items()}
        if summary.get("sketched", 0) == 0 and marker_kind(out) == "run":
            why = "; ".join(f"{src}: {reason}" for src, reason in pageless_inputs(staging) or [])
            raise EmptyScanError(
                f"no usable page could be read from the input{f' ({why})' if why else ''}; "
                f"{out} still holds its previous run (an empty scan never replaces one)",
                summary,
            )
        (staging / "settings.json").write_text(settings.to_json() + "\n", encoding="utf-8")
        (staging / "summary.json").write_text(
            json.dumps(summary, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8"
        )
    anchor_views(out)  # in place now: views by absolute path, for any DuckDB client
    return ScanResult(path=out, summary=summary)


# Skip reasons that say an input is damaged or could not be read, rather than what a record
# holds (`unreadable pdf: ...` is a page's content, not the file's).
_DAMAGE = r"^(unreadable (record|file|rows|entry|parquet file)|cannot (open|read|fetch)|damaged )"
# How many details (content types, say) one line shows of a reason.
_SHOWN_DETAILS = 3
_PLURAL = {"response": "responses", "resource": "resources", "row": "rows"}

# Per source that gave no page (and has no record skipped for the reason excluded): its
# commonest kind of skip (the words before the first ": "), where records that are no page
# candidate at all ("not a page: request record" and the like) count only when nothing else
# was skipped; with that kind's count, record types, distinct details (none, not NULL, for a
# reason without any, such as "redirect (HTTP 3xx)") and one whole reason.
_PAGELESS_SQL = """
WITH reasons AS (
    SELECT source, record_type, skipped_reason AS reason,
        split_part(skipped_reason, ': ', 1) AS kind,
        nullif(substr(skipped_reason, length(split_part(skipped_reason, ': ', 1)) + 3), '')
            AS detail
    FROM pages
), pageless AS (
    SELECT source FROM reasons GROUP BY source
    HAVING bool_and(reason IS NOT NULL) AND NOT bool_or(reason IS NOT DISTINCT FROM ?)
), kinds AS (
    SELECT source, kind, starts_with(kind, 'not a page') AS companion, count(*) AS n,
        coalesce(list(DISTINCT detail ORDER BY detail) FILTER (WHERE detail IS NOT NULL), [])
            AS details,
        list(DISTINCT record_type ORDER BY record_type) AS types, min(reason) AS reason
    FROM reasons JOIN pageless USING (source)
    GROUP BY source, kind
), ranked AS (
    SELECT *, row_number() OVER (
        PARTITION BY source ORDER BY companion, n DESC, kind) AS rank
    FROM kinds
)
SELECT source, kind, n, details, types, reason FROM ranked WHERE rank = 1 ORDER BY source
"""

_DAMAGED_SQL = f"""
SELECT source, count(*), min(record_offset), arg_min(skipped_reason, record_offset),
    arg_min(record_type, record_offset)
FROM pages
WHERE regexp_matches(skipped_reason, '{_DAMAGE}')
    AND source IN (SELECT source FROM pages WHERE skipped_reason IS NULL)
GROUP BY source
ORDER BY source
"""


@dataclass
class InputProblems:
    """What a finished run says about its inputs, read in one connection (`input_problems`):
    the damaged inputs that still gave pages, a line each (`_damage_lines`), and
    `pageless_inputs`' rows (None when the run cannot be opened)."""

    damaged: list[str]
    pageless: list[tuple[str, str]] | None


def input_problems(
    run: str | Path, exclude: str | None = None, skipped: int | None = None
) -> InputProblems:
    """The damaged inputs and `pageless_inputs(run, exclude)` together, as a scan's end
    reports them: the run opened once, not once for each (0.04 s each here), and not at
    all when its summary counts no `skipped` record (its `pages` rows are then all pages:
    no input is damaged or gave none)."""
    if skipped == 0:
        return InputProblems([], [])
    try:
        con = open_run(run)
    except RunError:
        return InputProblems([], None)
    try:
        return InputProblems(_damage_lines(con), _pageless_rows(con, exclude))
    finally:
        con.close()


def pageless_inputs(run: str | Path, exclude: str | None = None) -> list[tuple[str, str]] | None:
    """(source, why it gave no page) for every input of the run none of whose records
    became a page, leaving out inputs with a record skipped for `exclude` (WAT files, which
    hold links and never pages); None when the run cannot be opened.

    The reason is the commonest real one: a WARC whose responses were all PDFs-to-be or
    spreadsheets says `9 responses skipped: unsupported content type (application/rtf, ...)`,
    not `not a page: request record`, though its request records are as many."""
    try:
        con = open_run(run)
    except RunError:
        return None
    try:
        return _pageless_rows(con, exclude)
    finally:
        con.close()


def _pageless_rows(con: duckdb.DuckDBPyConnection, exclude: str | None) -> list[tuple[str, str]]:
    rows = con.execute(_PAGELESS_SQL, [exclude]).fetchall()
    return [
        (src, _skip_phrase(kind, n, details, types, reason))
        for src, kind, n, details, types, reason in rows
    ]


def _skip_phrase(kind: str, n: int, details: list[str], types: list[str], reason: str) -> str:
    """`n` records skipped for `kind` in a few words: a single record (or the row that
    stands for a whole file) by its whole reason, else the count, the kind and the first
    details."""
    if n == 1 or types == ["file"]:
        return reason
    noun = _PLURAL.get(types[0], "records") if len(types) == 1 else "records"
    shown = ", ".join(details[:_SHOWN_DETAILS]) + (", ..." if len(details) > _SHOWN_DETAILS else "")
    return f"{n} {noun} skipped: {kind}" + (f" ({shown})" if details else "")


def _damage_lines(con: duckdb.DuckDBPyConnection) -> list[str]:
    """One line per input of the run on `con` that is damaged or cut short but still gave
    pages: where its first unreadable record is and why, so a truncated download is not
    mistaken for a small crawl (inputs that gave no page are named by `pageless_inputs`)."""
    rows = con.execute(_DAMAGED_SQL).fetchall()
    lines = []
    for source, n, offset, reason, record_type in rows:
        kind, _, detail = reason.partition(": ")
        if record_type == "file":
            lines.append(f"{source}: {reason}")
            continue
        if record_type != "row":
            where = f"byte {offset}"
        elif source.endswith(".parquet"):
            where = f"row {offset:,}"
        else:
            where = f"line {offset + 1:,}"
        what = kind if n == 1 else f"{n:,} records ({kind}), the first"
        lines.append(f"{source}: {what} at {where}" + (f": {detail}" if detail else ""))
    return lines
