"""Copy one input file without its removed records, in the file's own format.

`dedup.py` decides which records go and names the copies; this module only moves bytes,
lines, rows and files. WARC/ARC records are copied byte for byte (a record runs from its
offset to the next record's), so a WET keeps its warcinfo and the `conversion` records of
its kept pages exactly as Common Crawl wrote them, one gzip member each. A WARC compressed as
one gzip stream (the ClueWeb09 sample) or as zstd has no record to copy in compressed form,
so its records' bytes are decompressed and each is compressed again on its own, the
one-member-per-record form WARC tools expect.
"""

from __future__ import annotations

import gzip
import shutil
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from fastwarc.stream_io import GzipReader, GzipWriter, ZstdReader, ZstdWriter

GZIP_MAGIC = b"\x1f\x8b"
ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_CHUNK = 1 << 20


@dataclass
class Copied:
    """Records (lines, rows, files) of one input written and left out, and how its form
    changed, if it did."""

    kept: int = 0
    removed: int = 0
    note: str | None = None


def _at_members(fh: BinaryIO, offsets: list[int]) -> bool:
    """Whether a gzip member starts at every record offset (records gzipped one by one)."""
    for off in offsets:
        fh.seek(off)
        if fh.read(2) != GZIP_MAGIC:
            return False
    return True


def write_archive(src: Path, dst: Path, kind: str, offsets: list[int], removed: set[int]) -> Copied:
    """Copy the records of a WARC/ARC file that are not in `removed`, in the file's form.

    A plain file or one gzip member per record: byte ranges are copied as they are. One gzip
    stream for the whole file (ClueWeb09) or zstd: the scan's offsets are positions in the
    decompressed stream, so it is decompressed and every kept record is compressed again as
    a member (frame) of its own, the form WARC tools expect."""
    if not offsets:  # the scan found no record in it: nothing to leave out
        shutil.copyfile(src, dst)
        return Copied()
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


def _copy_ranges(src: Path, dst: Path, offsets: list[int], removed: set[int]) -> Copied:
    """Records as byte ranges (a record runs from its offset to the next one's)."""
    done = Copied()
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
) -> Copied:
    """Decompress `src` front to back and write each kept record (the bytes from its offset
    to the next one's, unchanged) as a compressed member of its own. Each WARC record must
    begin with its version line, so offsets that do not frame the decompressed records fail
    the file rather than cut records apart."""
    done = Copied(note=note)
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


def write_jsonl(src: Path, dst: Path, removed: set[int]) -> Copied:
    done = Copied()
    opener = gzip.open if src.suffix == ".gz" else open
    with opener(src, "rb") as fin, opener(dst, "wb") as fout:
        for line_no, line in enumerate(fin):
            if line_no in removed:
                done.removed += 1
            else:
                done.kept += 1
                fout.write(line)
    return done


def write_parquet(src: Path, dst: Path, removed: set[int]) -> Copied:
    pf = pq.ParquetFile(src)
    gone = np.fromiter(removed, dtype=np.int64, count=len(removed))
    done, row = Copied(), 0
    with pq.ParquetWriter(dst, pf.schema_arrow, compression="zstd") as writer:
        for batch in pf.iter_batches(batch_size=65536):
            rows = np.arange(row, row + batch.num_rows, dtype=np.int64)
            keep = ~np.isin(rows, gone)
            writer.write_batch(batch.filter(pa.array(keep)))
            done.kept += int(keep.sum())
            done.removed += batch.num_rows - int(keep.sum())
            row += batch.num_rows
    return done


def write_html_dir(src: Path, dst: Path, removed_files: set[str]) -> Copied:
    done = Copied()
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
