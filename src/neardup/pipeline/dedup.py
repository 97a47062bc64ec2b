"""Write the input back without its non-representative near-duplicates.

The output keeps each input's own format and bytes (`dedup_formats.py` copies them): WARC,
ARC and WET records byte for byte, JSONL lines and Parquet rows filtered, HTML folders file
by file. Records that were skipped (requests, revisits, non-HTML) are kept, except the
request/metadata records that belong to a removed response. A WET's copy is thus its
warcinfo and the `conversion` records of its kept pages, which is the deduplicated text
corpus people build WET files into. Keep and remove lists name every page that was judged.

Inputs are written file by file, whatever form the scan was given them in: a folder or a glob
stands for the files the scan read from it (the `source` column of `pages`). Every one of
them is one `FileOutcome`, so none is dropped in silence: written, left out because it holds
nothing to deduplicate (a WAT file: metadata, no pages, which a copy would only repeat), or
not written, with the reason (gone since the scan, damaged), the others still written.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from fnmatch import fnmatch
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest import detect_input_kind
from neardup.ingest.commoncrawl import WAT_REASON
from neardup.ingest.html_dir import has_html_files
from neardup.ingest.limits import entry_problem, short_error
from neardup.ingest.remote import GLOB_CHARS
from neardup.pipeline.dedup_formats import (
    Copied,
    write_archive,
    write_html_dir,
    write_jsonl,
    write_parquet,
)
from neardup.pipeline.scan import ScanResult, scan
from neardup.store import RunError, load_summary, open_run, read_sql
from neardup.store.outputs import replacing_folder

# Why a WAT file has no copy: its records describe pages held elsewhere, and none is a page.
METADATA_ONLY = "metadata only: nothing to deduplicate"
# Names in the output folder that are not copies of inputs.
_RESERVED = frozenset(
    {"scan", "kept.parquet", "removed.parquet", "keep_urls.txt", "remove_urls.txt"}
)


@dataclass
class FileOutcome:
    """What became of one input file: written (with its records kept and removed, and a
    note when its form had to change), left out (`left_out`: it holds nothing to
    deduplicate, the reason says what), or not written, with the reason."""

    source: str  # the file the scan read (a record's `source`)
    given_as: str  # the input as the scan was given it: the file, a folder or a glob
    output: str | None = None
    records_kept: int = 0
    records_removed: int = 0
    note: str | None = None
    reason: str | None = None  # why it was not written
    left_out: bool = False  # not written by design, not for a failure

    def to_dict(self) -> dict[str, Any]:
        return {
            "input": self.source,
            "given_as": self.given_as,
            "written": self.output is not None,
            "output": self.output,
            "records_kept": self.records_kept,
            "records_removed": self.records_removed,
            "note": self.note,
            "reason": self.reason,
            "left_out": self.left_out,
        }


@dataclass
class DedupResult:
    out: Path
    kept: int = 0
    removed: int = 0
    companions_removed: int = 0  # request/metadata records of removed responses
    outcomes: list[FileOutcome] = field(default_factory=list)  # one per input file

    @property
    def files(self) -> dict[str, str]:
        """Input file -> its deduplicated copy, for every file written."""
        return {o.source: o.output for o in self.outcomes if o.output is not None}

    @property
    def not_written(self) -> dict[str, str]:
        """Input file -> why it could not be written (a failure: files left out by design
        are in `left_out`)."""
        return {
            o.source: o.reason or "" for o in self.outcomes if o.output is None and not o.left_out
        }

    @property
    def left_out(self) -> dict[str, str]:
        """Input file -> why it has no copy although nothing failed (a WAT file)."""
        return {o.source: o.reason or "" for o in self.outcomes if o.left_out}

    @property
    def notes(self) -> dict[str, str]:
        """Input file -> how its copy differs in form (say, recompressed per record)."""
        return {o.source: o.note for o in self.outcomes if o.note}


def _with_record_offset(con: duckdb.DuckDBPyConnection) -> None:
    """Runs written before the byte-offset column was renamed call it `offset`: a temporary
    view names it `record_offset`, so the SQL below reads runs of either age."""
    columns = {r[0] for r in con.execute("DESCRIBE pages").fetchall()}
    if "record_offset" in columns or "offset" not in columns:
        return
    db = con.execute("SELECT current_database()").fetchone()[0]  # type: ignore[index]
    con.execute(
        'CREATE TEMP VIEW pages AS SELECT * RENAME ("offset" AS record_offset) '
        f'FROM "{db}".main.pages'
    )


def _removed_offsets(con: duckdb.DuckDBPyConnection) -> dict[str, set[int]]:
    rows = con.execute(read_sql("dedup_removed_records.sql")).fetchall()
    by_source: dict[str, set[int]] = {}
    for source, offset in rows:
        by_source.setdefault(source, set()).add(int(offset))
    return by_source


def _record_offsets(con: duckdb.DuckDBPyConnection, source: str) -> list[int]:
    rows = con.execute(
        "SELECT DISTINCT record_offset FROM pages WHERE source = ? ORDER BY 1", [source]
    ).fetchall()
    return [int(r[0]) for r in rows]


def _output_name(name: str, used: set[str]) -> str:
    """`name` (a file name, or a path relative to a folder input), numbered when an earlier
    input took it or it is one of the lists' names."""
    name = name or "input"
    candidate, n = name, 1
    while candidate in used or candidate.split("/", 1)[0] in _RESERVED:
        n += 1
        candidate = f"{n}-{name}"
    used.add(candidate)
    return candidate


def _input_files(raw: str, sources: list[str]) -> list[tuple[str, str]] | str:
    """(file, output name) for the files the scan read for input `raw`, or why there are
    none. A file is itself; a folder of archives and tables, or a glob the shell did not
    expand, stands for the files among the run's sources (the `source` column of `pages`)
    that lie in it or match it, named by their path inside the folder or their file name.
    An HTML folder is one input, written file by file."""
    path = Path(raw)
    if raw in sources or path.is_file() or (not path.exists() and not GLOB_CHARS & set(raw)):
        return [(raw, path.name)]
    if path.is_dir():
        if has_html_files(path):
            return [(raw, path.name)]
        inside = [s for s in sources if Path(s).is_relative_to(path)]
        files = [(s, Path(s).relative_to(path).as_posix()) for s in inside]
    else:
        files = [(s, Path(s).name) for s in sources if fnmatch(s, raw)]
    return files or "the scan read no file from it"


def _write_lists(con: duckdb.DuckDBPyConnection, out: Path) -> tuple[int, int]:
    import pyarrow.compute as pc  # here: its import costs every scan 0.05 s

    judged = con.sql(read_sql("dedup_judged.sql")).to_arrow_table()
    removed = judged.filter(pc.invert(judged.column("keep")))
    kept = judged.filter(judged.column("keep"))
    pq.write_table(removed.drop_columns(["keep"]), out / "removed.parquet")
    pq.write_table(kept.drop_columns(["keep"]), out / "kept.parquet")
    for name, table in (("remove_urls.txt", removed), ("keep_urls.txt", kept)):
        urls = [u for u in table.column("url").to_pylist() if u]
        (out / name).write_text("".join(f"{u}\n" for u in urls), encoding="utf-8")
    return kept.num_rows, removed.num_rows


def write_deduplicated(run: str | Path, out: str | Path, force: bool = False) -> DedupResult:
    """Write every input of `run` to `out` without its removed near-duplicates.

    `out` may not overlap the inputs or the run; it is built beside and renamed into place,
    and `force` replaces only an earlier dedup output (see `neardup.store.outputs`)."""
    run = Path(run)
    inputs = load_summary(run).get("inputs", [])
    if not inputs:
        raise RunError(f"{run} does not record its inputs")
    with replacing_folder(out, "dedup", [*inputs, run], force) as staging:
        result = _write_into(run, staging, inputs)
    return _relocated(result, staging, Path(out))


def scan_and_deduplicate(
    inputs: list[str | Path],
    out: str | Path,
    settings: Settings | None = None,
    force: bool = False,
    **scan_options: Any,
) -> tuple[ScanResult, DedupResult]:
    """Scan `inputs` into `out/scan` and write their deduplicated copy into `out`, as one
    output: a failure at any step leaves `out` as it was. Without `settings`, the scan
    extracts no link graph and keeps no page text: the copy is made from the inputs."""
    paths = [str(p) for p in inputs]
    settings = settings or Settings(extract_links=False, keep_text=False)
    with replacing_folder(out, "dedup", paths, force) as staging:
        scanned = scan(paths, staging / "scan", settings, **scan_options)
        result = _write_into(scanned.path, staging, paths)
    scanned.path = Path(out) / "scan"
    return scanned, _relocated(result, staging, Path(out))


def _relocated(result: DedupResult, staging: Path, out: Path) -> DedupResult:
    """The result with the staging folder's paths replaced by the final ones."""
    result.out = out
    for outcome in result.outcomes:
        if outcome.output is not None:
            outcome.output = str(out / Path(outcome.output).relative_to(staging))
    return result


def _write_into(run: Path, out: Path, inputs: list[str]) -> DedupResult:
    result = DedupResult(out=out)
    con = open_run(run)
    try:
        _with_record_offset(con)
        result.kept, result.removed = _write_lists(con, out)
        removed = _removed_offsets(con)
        result.companions_removed = sum(len(v) for v in removed.values()) - result.removed
        sources = [
            r[0] for r in con.execute("SELECT DISTINCT source FROM pages ORDER BY 1").fetchall()
        ]
        used: set[str] = set()
        for raw in inputs:
            files = _input_files(raw, sources)
            if isinstance(files, str):
                result.outcomes.append(FileOutcome(raw, raw, reason=files))
                continue
            for src, name in files:
                outcome = FileOutcome(src, raw)
                result.outcomes.append(outcome)
                if _metadata_only(con, src):
                    outcome.reason, outcome.left_out = METADATA_ONLY, True
                    continue
                dst = out / _output_name(name, used)
                try:
                    copied = _write_one(con, src, dst, removed)
                except (OSError, ValueError) as err:
                    _remove(dst)
                    outcome.reason = _reason(err, src)
                else:
                    outcome.output = str(dst)
                    outcome.records_kept, outcome.records_removed = copied.kept, copied.removed
                    outcome.note = copied.note
    finally:
        con.close()
    return result


def _write_one(
    con: duckdb.DuckDBPyConnection, src: str, dst: Path, removed: dict[str, set[int]]
) -> Copied:
    """Write input file (or HTML folder) `src` to `dst` in its own format."""
    kind = detect_input_kind(src)
    if kind == "unreadable":  # a FIFO, a dangling link: the scan gave it one row, as here
        raise ValueError(entry_problem(src) or "unreadable entry")
    dst.parent.mkdir(parents=True, exist_ok=True)
    if kind in ("warc", "arc"):
        offsets = _record_offsets(con, src)
        return write_archive(Path(src), dst, kind, offsets, removed.get(src, set()))
    if kind == "jsonl":
        return write_jsonl(Path(src), dst, removed.get(src, set()))
    if kind == "parquet":
        return write_parquet(Path(src), dst, removed.get(src, set()))
    if kind == "html_dir":
        return write_html_dir(Path(src), dst, set(removed))
    raise ValueError(f"cannot write a {kind} input")  # detect_input_kind knows no others


def _metadata_only(con: duckdb.DuckDBPyConnection, src: str) -> bool:
    """Whether every record of `src` is WAT metadata (or its warcinfo): a WAT file holds no
    page, so dedup removes nothing from it, and a copy would be the input again. A WAT's
    links still served the scan's link graph."""
    wat, other = con.execute(
        "SELECT count(*) FILTER (WHERE skipped_reason = $wat), "
        "count(*) FILTER (WHERE coalesce(record_type, '') <> 'warcinfo' "
        "AND skipped_reason IS DISTINCT FROM $wat) FROM pages WHERE source = $src",
        {"wat": WAT_REASON, "src": src},
    ).fetchone() or (0, 0)
    return bool(wat) and not other


def _reason(err: Exception, src: str) -> str:
    """Why `src` was not written, in one line that does not repeat its path (the line that
    shows it names the file already)."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    text = short_error(err)
    return text.removeprefix(f"{src}: ")


def _remove(path: Path) -> None:
    """Take away what a failed write left behind."""
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
