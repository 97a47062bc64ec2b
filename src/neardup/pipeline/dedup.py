"""Write the input back without its non-representative near-duplicates.

The output keeps each input's own format and bytes: WARC/ARC records are copied byte for
byte (a record runs from its offset to the next record's), JSONL lines and Parquet rows are
filtered, HTML folders are copied file by file. Records that were skipped (requests,
revisits, non-HTML) are kept, except the request/metadata records that belong to a removed
response. Keep and remove lists name every page that was judged.
"""

from __future__ import annotations

import gzip
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.ingest import detect_input_kind
from neardup.pipeline.scan import ScanResult, scan
from neardup.store import RunError, load_summary, open_run, read_sql
from neardup.store.outputs import replacing_folder

GZIP_MAGIC = b"\x1f\x8b"


@dataclass
class DedupResult:
    out: Path
    kept: int = 0
    removed: int = 0
    companions_removed: int = 0  # request/metadata records of removed responses
    files: dict[str, str] = field(default_factory=dict)  # input -> output path
    not_written: dict[str, str] = field(default_factory=dict)  # input -> reason


def _removed_offsets(con: duckdb.DuckDBPyConnection) -> dict[str, set[int]]:
    rows = con.execute(read_sql("dedup_removed_records.sql")).fetchall()
    by_source: dict[str, set[int]] = {}
    for source, offset in rows:
        by_source.setdefault(source, set()).add(int(offset))
    return by_source


def _record_offsets(con: duckdb.DuckDBPyConnection, source: str) -> list[int]:
    rows = con.execute(
        'SELECT DISTINCT record_offset FROM pages WHERE source = ? ORDER BY 1', [source]
    ).fetchall()
    return [int(r[0]) for r in rows]


def _archive_ranges(path: Path, offsets: list[int]) -> Iterator[tuple[int, int]]:
    """(start, end) byte range of every record, checking that the offsets really frame it."""
    size = path.stat().st_size
    if any(b <= a for a, b in pairwise(offsets)):
        raise ValueError("record offsets are not increasing (a single-stream gzip file?)")
    with path.open("rb") as fh:
        head = fh.read(2)
        if head == GZIP_MAGIC:
            for off in offsets:
                fh.seek(off)
                if fh.read(2) != GZIP_MAGIC:
                    raise ValueError(
                        "records are not separate gzip members, so they cannot be copied one by one"
                    )
    ends = [*offsets[1:], size]
    yield from zip(offsets, ends, strict=True)


def _write_archive(src: Path, dst: Path, offsets: list[int], removed: set[int]) -> None:
    ranges = list(_archive_ranges(src, offsets))
    with src.open("rb") as fin, dst.open("wb") as fout:
        if ranges and ranges[0][0] > 0:  # a file header before the first record
            fout.write(fin.read(ranges[0][0]))
        for start, end in ranges:
            if start in removed:
                continue
            fin.seek(start)
            remaining = end - start
            while remaining:
                chunk = fin.read(min(remaining, 1 << 20))
                if not chunk:
                    break
                fout.write(chunk)
                remaining -= len(chunk)


def _write_jsonl(src: Path, dst: Path, removed: set[int]) -> None:
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as fin, opener(dst, "wb") as fout:
        for line_no, line in enumerate(fin):
            if line_no not in removed:
                fout.write(line)


def _write_parquet(src: Path, dst: Path, removed: set[int]) -> None:
    pf = pq.ParquetFile(src)
    gone = np.fromiter(removed, dtype=np.int64, count=len(removed))
    row = 0
    with pq.ParquetWriter(dst, pf.schema_arrow, compression="zstd") as writer:
        for batch in pf.iter_batches(batch_size=65536):
            rows = np.arange(row, row + batch.num_rows, dtype=np.int64)
            writer.write_batch(batch.filter(pa.array(~np.isin(rows, gone))))
            row += batch.num_rows


def _write_html_dir(src: Path, dst: Path, removed_files: set[str]) -> None:
    for path in sorted(src.rglob("*")):
        if path.is_file() and str(path) not in removed_files:
            target = dst / path.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)


def _output_name(src: Path, used: set[str]) -> str:
    name = src.name or "input"
    candidate, n = name, 1
    while candidate in used:
        n += 1
        candidate = f"{n}-{name}"
    used.add(candidate)
    return candidate


def _write_lists(con: duckdb.DuckDBPyConnection, out: Path) -> tuple[int, int]:
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
    output: a failure at any step leaves `out` as it was."""
    paths = [str(p) for p in inputs]
    settings = settings or Settings(extract_links=False)
    with replacing_folder(out, "dedup", paths, force) as staging:
        scanned = scan(paths, staging / "scan", settings, **scan_options)
        result = _write_into(scanned.path, staging, paths)
    scanned.path = Path(out) / "scan"
    return scanned, _relocated(result, staging, Path(out))


def _relocated(result: DedupResult, staging: Path, out: Path) -> DedupResult:
    """The result with the staging folder's paths replaced by the final ones."""
    result.out = out
    result.files = {k: str(out / Path(v).relative_to(staging)) for k, v in result.files.items()}
    return result


def _write_into(run: Path, out: Path, inputs: list[str]) -> DedupResult:
    result = DedupResult(out=out)
    con = open_run(run)
    try:
        result.kept, result.removed = _write_lists(con, out)
        removed = _removed_offsets(con)
        result.companions_removed = sum(len(v) for v in removed.values()) - result.removed
        used: set[str] = {"scan"}
        for raw in inputs:
            src = Path(raw)
            dst = out / _output_name(src, used)
            kind = detect_input_kind(raw)
            try:
                if kind in ("warc", "arc"):
                    offsets = _record_offsets(con, raw)
                    _write_archive(src, dst, offsets, removed.get(raw, set()))
                elif kind == "jsonl":
                    _write_jsonl(src, dst, removed.get(raw, set()))
                elif kind == "parquet":
                    _write_parquet(src, dst, removed.get(raw, set()))
                elif kind == "html_dir":
                    _write_html_dir(src, dst, set(removed))
                else:  # pragma: no cover - detect_input_kind knows no other kinds
                    raise ValueError(f"unsupported input kind {kind}")
                result.files[raw] = str(dst)
            except (OSError, ValueError) as err:
                if dst.is_file():
                    dst.unlink()
                elif dst.is_dir():
                    shutil.rmtree(dst)
                result.not_written[raw] = str(err)
    finally:
        con.close()
    return result
