"""Write the input back without its non-representative near-duplicates.

The output keeps each input's own format and bytes: WARC/ARC records are copied byte for
byte (a record runs from its offset to the next record's), JSONL lines and Parquet rows are
filtered, HTML folders are copied file by file. A WARC compressed as one gzip stream (the
ClueWeb09 sample) or as zstd has no record to copy in compressed form, so its records' bytes
are decompressed and each is compressed again on its own, the one-member-per-record form WARC
tools expect. Records that were skipped (requests, revisits, non-HTML) are kept, except the
request/metadata records that belong to a removed response. Keep and remove lists name every
page that was judged.

Inputs are written file by file, whatever form the scan was given them in: a folder or a glob
stands for the files the scan read from it (the `source` column of `pages`). A file that
cannot be written (gone since the scan, damaged) is one `FileOutcome` with its reason, and
the others are still written.
"""

from __future__ import annotations

import gzip
import shutil
from dataclasses import dataclass, field
from fnmatch import fnmatch
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from fastwarc.stream_io import GzipReader, GzipWriter, ZstdReader, ZstdWriter

from neardup.config import Settings
from neardup.ingest import detect_input_kind
from neardup.ingest.html_dir import has_html_files
from neardup.ingest.limits import short_error
from neardup.ingest.remote import GLOB_CHARS
from neardup.pipeline.scan import ScanResult, scan
from neardup.store import RunError, load_summary, open_run, read_sql
from neardup.store.outputs import replacing_folder

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 20
# Names in the output folder that are not copies of inputs.
_RESERVED = frozenset(
    {"scan", "kept.parquet", "removed.parquet", "keep_urls.txt", "remove_urls.txt"}
)


@dataclass
class FileOutcome:
    """What became of one input file: written (with its records kept and removed, and a
    note when its form had to change) or not written, with the reason."""

    source: str  # the file the scan read (a record's `source`)
    given_as: str  # the input as the scan was given it: the file, a folder or a glob
    output: str | None = None
    records_kept: int = 0
    records_removed: int = 0
    note: str | None = None
    reason: str | None = None  # why it was not written

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
        """Input file -> why it could not be written."""
        return {o.source: o.reason or "" for o in self.outcomes if o.output is None}

    @property
    def notes(self) -> dict[str, str]:
        """Input file -> how its copy differs in form (say, recompressed per record)."""
        return {o.source: o.note for o in self.outcomes if o.note}


@dataclass
class _Copied:
    """Records (lines, rows, files) of one input written and left out, and how its form
    changed, if it did."""

    kept: int = 0
    removed: int = 0
    note: str | None = None


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


def _at_members(fh: BinaryIO, offsets: list[int]) -> bool:
    """Whether a gzip member starts at every record offset (records gzipped one by one)."""
    for off in offsets:
        fh.seek(off)
        if fh.read(2) != GZIP_MAGIC:
            return False
    return True


def _write_archive(
    src: Path, dst: Path, kind: str, offsets: list[int], removed: set[int]
) -> _Copied:
    """Copy the records of a WARC/ARC file that are not in `removed`, in the file's form.

    A plain file or one gzip member per record: byte ranges are copied as they are. One gzip
    stream for the whole file (ClueWeb09) or zstd: the scan's offsets are positions in the
    decompressed stream, so it is decompressed and every kept record is compressed again as
    a member (frame) of its own, the form WARC tools expect."""
    if not offsets:  # the scan found no record in it: nothing to leave out
        shutil.copyfile(src, dst)
        return _Copied()
    if any(b <= a for a, b in pairwise(offsets)):
        raise ValueError("record offsets in the pages table are not increasing")
    with src.open("rb") as fh:
        head = fh.read(4)
        if head.startswith(GZIP_MAGIC) and not _at_members(fh, offsets):
            note = "one gzip stream in the input; written with one gzip member per record"
            return _recompress(src, dst, kind, offsets, removed, GzipReader, GzipWriter, note)
    if head == ZSTD_MAGIC:
        note = "zstd input; written with one zstd frame per record"
        return _recompress(src, dst, kind, offsets, removed, ZstdReader, ZstdWriter, note)
    return _copy_ranges(src, dst, offsets, removed)


def _copy_ranges(src: Path, dst: Path, offsets: list[int], removed: set[int]) -> _Copied:
    """Records as byte ranges (a record runs from its offset to the next one's)."""
    done = _Copied()
    ends = [*offsets[1:], src.stat().st_size]
    with src.open("rb") as fin, dst.open("wb") as fout:
        if offsets[0] > 0:  # a file header before the first record
            fout.write(fin.read(offsets[0]))
        for start, end in zip(offsets, ends, strict=True):
            if start in removed:
                done.removed += 1
                continue
            done.kept += 1
            fin.seek(start)
            _pump(fin.read, fout.write, end - start)
    return done


def _pump(read: Any, write: Any, size: int | None) -> int:
    """Move `size` bytes (None: all that is left) from `read` to `write` in chunks; returns
    how many moved."""
    moved = 0
    while size is None or moved < size:
        chunk = read(_CHUNK if size is None else min(_CHUNK, size - moved))
        if not chunk:
            break
        write(chunk)
        moved += len(chunk)
    return moved


def _recompress(
    src: Path,
    dst: Path,
    kind: str,
    offsets: list[int],
    removed: set[int],
    reader_type: Any,
    writer_type: Any,
    note: str,
) -> _Copied:
    """Decompress `src` front to back and write each kept record (the bytes from its offset
    to the next one's, unchanged) as a compressed member of its own. Each WARC record must
    begin with its version line, so offsets that do not frame the decompressed records fail
    the file rather than cut records apart."""
    done = _Copied(note=note)
    ends: list[int | None] = [*offsets[1:], None]
    with src.open("rb") as fin, dst.open("wb") as fout:
        reader, writer = reader_type(fin, fsspec_args=False), writer_type(fout, fsspec_args=False)
        try:
            if offsets[0] > 0:  # bytes before the first record: a member of their own
                _pump(reader.read, writer.write, offsets[0])
                writer.finish()
            for start, end in zip(offsets, ends, strict=True):
                head = reader.read(5)
                if kind == "warc" and not head.startswith(b"WARC/"):
                    raise ValueError(f"no WARC record at offset {start} of the decompressed file")
                size = None if end is None else end - start - len(head)
                if start in removed:
                    done.removed += 1
                    _pump(reader.read, lambda _b: None, size)
                    continue
                done.kept += 1
                writer.write(head)
                _pump(reader.read, writer.write, size)
                writer.finish()
        finally:
            writer.close()
            reader.close()
    return done


def _write_jsonl(src: Path, dst: Path, removed: set[int]) -> _Copied:
    done = _Copied()
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as fin, opener(dst, "wb") as fout:
        for line_no, line in enumerate(fin):
            if line_no in removed:
                done.removed += 1
            else:
                done.kept += 1
                fout.write(line)
    return done


def _write_parquet(src: Path, dst: Path, removed: set[int]) -> _Copied:
    pf = pq.ParquetFile(src)
    gone = np.fromiter(removed, dtype=np.int64, count=len(removed))
    done, row = _Copied(), 0
    with pq.ParquetWriter(dst, pf.schema_arrow, compression="zstd") as writer:
        for batch in pf.iter_batches(batch_size=65536):
            rows = np.arange(row, row + batch.num_rows, dtype=np.int64)
            keep = ~np.isin(rows, gone)
            writer.write_batch(batch.filter(pa.array(keep)))
            done.kept += int(keep.sum())
            done.removed += batch.num_rows - int(keep.sum())
            row += batch.num_rows
    return done


def _write_html_dir(src: Path, dst: Path, removed_files: set[str]) -> _Copied:
    done = _Copied()
    for path in sorted(src.rglob("*")):
        if not path.is_file():
            continue
        if str(path) in removed_files:
            done.removed += 1
            continue
        done.kept += 1
        target = dst / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
    return done


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
                result.outcomes.append(outcome)
    finally:
        con.close()
    return result


def _write_one(
    con: duckdb.DuckDBPyConnection, src: str, dst: Path, removed: dict[str, set[int]]
) -> _Copied:
    """Write input file (or HTML folder) `src` to `dst` in its own format."""
    kind = detect_input_kind(src)
    dst.parent.mkdir(parents=True, exist_ok=True)
    if kind in ("warc", "arc"):
        offsets = _record_offsets(con, src)
        return _write_archive(Path(src), dst, kind, offsets, removed.get(src, set()))
    if kind == "jsonl":
        return _write_jsonl(Path(src), dst, removed.get(src, set()))
    if kind == "parquet":
        return _write_parquet(Path(src), dst, removed.get(src, set()))
    if kind == "html_dir":
        return _write_html_dir(Path(src), dst, set(removed))
    raise ValueError(f"cannot write a {kind} input")  # detect_input_kind knows no others


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
