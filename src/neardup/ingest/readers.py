"""Input dispatch: which reader handles a path, and one record stream over all inputs.

Kinds are decided before anything is read, so that a typo or an unsupported file fails the
command at once ("cannot read X: ...") instead of after an hour of ingest. The content decides
over the file name: an ARC named .warc.gz is read as ARC (FastWARC would silently return
nothing for it), a gzipped JSONL named .json.gz as JSONL.

A folder entry that cannot be read (a dangling symlink, a FIFO, a file without permission) is
not an error that ends the scan: it is an input of kind "unreadable", which becomes one row
with its reason. File names that are not UTF-8 are written as `source` with their odd bytes
escaped, since Parquet and DuckDB only take UTF-8.
"""

from __future__ import annotations

import glob
import json
import os
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import cast

from neardup.config import DEFAULT_MAX_PAYLOAD_BYTES
from neardup.ingest.arc_reader import iter_arc
from neardup.ingest.common import read_head, sniff_kind
from neardup.ingest.html_dir import has_html_files, iter_html_dir
from neardup.ingest.input_sizes import InputMeter, OnBytes, local_size
from neardup.ingest.limits import entry_problem, safe_text
from neardup.ingest.record import RawRecord
from neardup.ingest.remote import (
    GLOB_CHARS,
    STDIN,
    expand_remote,
    fetch_head,
    is_remote,
    iter_remote,
    remote_size,
    url_name,
)
from neardup.ingest.tables import LineBlock, iter_jsonl, iter_jsonl_blocks, iter_parquet
from neardup.ingest.warc_reader import iter_warc

KINDS = ("warc", "arc", "jsonl", "parquet", "html_dir", "unreadable")
# Common Crawl's WET and WAT files are WARC files named `.warc.wet.gz` / `.warc.wat.gz`,
# which no WARC suffix matches: without their own, a folder walk passed them over in silence.
_SUFFIX_KINDS = (
    ((".warc", ".warc.gz", ".warc.zst", ".warc.zstd"), "warc"),
    ((".warc.wet", ".warc.wet.gz", ".warc.wat", ".warc.wat.gz"), "warc"),
    ((".arc", ".arc.gz"), "arc"),
    ((".jsonl", ".jsonl.gz", ".ndjson", ".ndjson.gz"), "jsonl"),
    ((".parquet", ".pq"), "parquet"),
    ((".html", ".htm"), "html_dir"),
)
# Sizes of URLs cost a request each: asked in parallel, and not at all for a longer list
# (a whole published crawl), whose progress bar then counts bytes without a total.
_SIZE_THREADS = 16
_MAX_SIZE_REQUESTS = 1000

# The file by which neardup marks a folder it wrote (store/outputs.py's MARKER, which
# this layer may not import; a test checks the two agree), and what a folder walk does
# with such a folder. Most hold neardup's own tables (a run, a store of crawls, a service
# index, Spark's work folder) and are passed over: their Parquet files are no crawl. Two
# hold crawl files: a demo crawl (its WARCs), and a dedup output (the cleaned copies of
# its inputs), whose lists beside them are passed over (its scan is a run of its own).
OUTPUT_MARKER = ".neardup-output"
_CRAWL_OUTPUTS: dict[str, frozenset[str]] = {
    "demo crawl": frozenset(),
    "dedup": frozenset({"kept.parquet", "removed.parquet"}),
}


class InputError(ValueError):
    """An input path that does not exist or is of no kind we can read."""


def detect_input_kind(path: str) -> str:
    """The input kind of `path` (one of KINDS); InputError if none fits.

    A directory is "html_dir" when it holds .html/.htm files; a single .html file is accepted
    as a one-page html_dir. Files are sniffed (gzip/zstd are looked into) and the content wins
    over the suffix; the suffix only decides for files whose start says nothing (empty or
    damaged files, WARCs with junk before the first record), so their reader can report them.
    A glob pattern or a directory of archives is checked file by file and gives their common
    kind, or "mixed" (`expand_inputs` gives the kind of each file).
    """
    items = _expand_one(path)
    if len(items) == 1 and items[0] == path:
        return _detect_one(path)
    kinds = {_detect_one(item, listed=True) for item in items}
    return kinds.pop() if len(kinds) == 1 else "mixed"


def _detect_one(path: str, listed: bool = False) -> str:
    """The kind of one file, or of one directory holding HTML files.

    An entry that exists but is no regular file (dangling symlink, FIFO, socket) is
    "unreadable", and so is a file found in a folder (`listed`) that cannot be read.
    """
    if is_remote(path):
        return _detect_remote(path)
    if entry_problem(path) is not None:
        return "unreadable"
    p = Path(path)
    if p.is_dir():
        if has_html_files(p):
            return "html_dir"
        raise InputError(f"{path}: directory has no .html or .htm files")
    if not p.exists():
        raise InputError(f"{path}: no such file or directory")
    if not p.is_file():
        raise InputError(f"{path}: not a regular file")
    try:
        head = read_head(path)
    except OSError as exc:
        if listed:
            return "unreadable"
        raise InputError(f"{safe_text(path)}: cannot read: {exc.strerror or exc}") from None
    except Exception:  # damaged gzip: the reader will report it record by record
        head = b""
    kind = _kind_from_content(head)
    if kind is None:
        kind = _kind_from_suffix(p.name)
    if kind is None:
        raise InputError(
            f"{path}: unknown input kind (not WARC, ARC, JSONL, Parquet or HTML;"
            f" starts with {head[:24]!r})"
        )
    return kind


def _detect_remote(url: str) -> str:
    """The kind of a URL from its name, else from its first bytes (one short fetch); of
    stdin from its first bytes. A URL that cannot be fetched is read later, where its failure
    becomes its one row."""
    kind = None if url == "-" else _kind_from_suffix(url_name(url))
    if kind is None:
        try:
            head = fetch_head(url)
        except OSError:
            return "warc"  # iter_remote fetches it again and reports why it cannot
        kind = _kind_from_content(head)
    if kind is None:
        shown = "stdin" if url == "-" else url
        raise InputError(f"{shown}: unknown input kind (not WARC, JSONL or Parquet)")
    if kind in ("arc", "html_dir"):
        raise InputError(f"{url}: ARC files and HTML folders are read from local paths only")
    return kind


def _kind_from_content(head: bytes) -> str | None:
    """The input kind from sniffed content (an HTML file counts as a one-page html_dir)."""
    kind = sniff_kind(head)
    return "html_dir" if kind == "html" else kind


def _kind_from_suffix(name: str) -> str | None:
    """The input kind named by the file's suffix, if any."""
    lower = name.lower()
    for suffixes, kind in _SUFFIX_KINDS:
        if lower.endswith(suffixes):
            return kind
    return None


def expand_inputs(paths: list[str]) -> list[tuple[str, str]]:
    """(path, kind) for every input, in the given order; raises InputError before any reading.

    Glob patterns the shell did not expand are expanded here (sorted). A directory with HTML
    files is one html_dir input; a directory without any is expanded into the archive and
    table files it holds (recursively, sorted), so `neardup scan crawl/` works on a folder of
    WARCs.
    """
    if not paths:
        raise InputError("no input paths given")
    out: list[tuple[str, str]] = []
    for path in paths:
        items = _expand_one(path)
        listed = items != [path]
        for item in items:
            out.append((item, _detect_one(item, listed)))
    return out


def _expand_one(path: str) -> list[str]:
    """One path, a glob's matches, or a directory of archives' files."""
    if is_remote(path):
        return expand_remote(path, InputError)
    if not os.path.exists(path) and GLOB_CHARS & set(path):
        matches = sorted(glob.glob(path, recursive=True))
        if not matches:
            raise InputError(f"{path}: pattern matches no files")
        return [m for match in matches for m in _expand_one(match)]
    p = Path(path)
    if p.is_dir() and not has_html_files(p):
        kind = output_kind(p)
        if kind is not None and kind not in _CRAWL_OUTPUTS:
            raise InputError(f"{path}: a neardup output ({kind}), not crawl files")
        files = sorted(_folder_files(p), key=lambda f: f.relative_to(p).as_posix())
        if not files:
            raise InputError(f"{path}: directory has no HTML, WARC, ARC, JSONL or Parquet files")
        return [str(f) for f in files]
    return [path]


def output_kind(folder: Path) -> str | None:
    """The kind of neardup output `folder` holds ("run", "dedup", ...), from its marker;
    None for a folder neardup did not write ("unknown" for an unreadable marker)."""
    marker = folder / OUTPUT_MARKER
    if not marker.is_file():
        return None
    try:
        return str(json.loads(marker.read_text(encoding="utf-8"))["kind"])
    except (ValueError, KeyError, TypeError, OSError):
        return "unknown"


def _folder_files(top: Path) -> Iterator[Path]:
    """The input entries under `top`, passing over the folders of neardup's own outputs
    (`neardup_outputs` names them) and a dedup output's lists."""
    for root, dirs, names in os.walk(top):
        here = Path(root)
        kind = output_kind(here) if OUTPUT_MARKER in names else None
        if kind is not None and kind not in _CRAWL_OUTPUTS:
            dirs[:] = []
            continue
        passed_over = _CRAWL_OUTPUTS.get(kind or "", frozenset())
        for name in names:  # a link to a folder is not followed, as `rglob` did not
            entry = here / name
            if name not in passed_over and _is_input_entry(entry):
                yield entry


def neardup_outputs(paths: list[str]) -> list[tuple[str, str]]:
    """(folder, kind) of every neardup output a folder walk of `paths` passes over (a run
    stored inside the crawl folder, ...), for the note that says so; never raises."""
    found: list[tuple[str, str]] = []
    for path in paths:
        if is_remote(path) or not os.path.isdir(path):
            continue
        for root, dirs, names in os.walk(path):
            kind = output_kind(Path(root)) if OUTPUT_MARKER in names else None
            if kind is not None and kind not in _CRAWL_OUTPUTS and root != path:
                found.append((root, kind))
                dirs[:] = []
    return found


def _is_input_entry(entry: Path) -> bool:
    """A folder entry to read: a file with an input suffix, or one that cannot be read
    at all (reported as a row rather than passed over in silence)."""
    if entry.is_dir():
        return False
    if entry_problem(str(entry)) is not None:
        return True
    return entry.is_file() and _kind_from_suffix(entry.name) is not None


def iter_records(
    paths: list[str],
    base_url: str | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    on_bytes: OnBytes | None = None,
) -> Iterator[RawRecord]:
    """Every record of every input, inputs in the given order, records in file order.

    All inputs are checked first (InputError for a missing or unknown one), so this raises
    before the first record or not at all; `base_url` is the URL prefix for html_dir inputs.
    Bodies above `max_payload_bytes` are not read: their records say "payload too large".

    `on_bytes(n)`, when given, is called as the readers consume n more bytes of the inputs,
    for a progress bar whose total is `input_bytes(paths)`: once every record is read, the
    calls add up to that total (on a local input exactly; on a URL, the bytes streamed).
    """
    inputs = expand_inputs(paths)
    return cast(Iterator[RawRecord], _chain(inputs, base_url, max_payload_bytes, on_bytes))


def iter_record_units(
    paths: list[str],
    base_url: str | None = None,
    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    on_bytes: OnBytes | None = None,
) -> Iterator[RawRecord | LineBlock]:
    """`iter_records`, except that the lines of a local JSONL file come as `LineBlock`s,
    unparsed: `tables.block_records` turns a block into its records, and the scan runs it
    in its workers, since parsing, not reading, is what a table costs."""
    inputs = expand_inputs(paths)
    return _chain(inputs, base_url, max_payload_bytes, on_bytes, blocks=True)


def iter_input_units(
    path: str, kind: str, base_url: str | None, cap: int, on_bytes: OnBytes | None = None
) -> Iterator[RawRecord | LineBlock]:
    """`iter_record_units` of one input already checked (`expand_inputs` gave its kind)."""
    return _chain([(path, kind)], base_url, cap, on_bytes, blocks=True)


def _chain(
    inputs: list[tuple[str, str]],
    base_url: str | None,
    cap: int,
    on_bytes: OnBytes | None,
    blocks: bool = False,
) -> Iterator[RawRecord | LineBlock]:
    """The records of the checked inputs, one reader after another (with `blocks`, a local
    JSONL file's lines in blocks)."""
    for path, kind in inputs:
        local = on_bytes is not None and not is_remote(path)
        meter = InputMeter(local_size(path) if local else None, on_bytes)
        if is_remote(path):
            records = iter_remote(path, kind, cap, meter.reached if on_bytes else None)
        elif kind == "jsonl":  # rows are numbered, not placed: the reader tells its position
            read = iter_jsonl_blocks if blocks else iter_jsonl
            records = read(path, cap, meter.reached if on_bytes else None)
        else:
            records = _reader(kind, base_url, cap)(path)
        for rec in records:
            if isinstance(rec, LineBlock):
                rec.source = safe_text(rec.source)
                yield rec
                continue
            meter.record(rec)
            rec.source = safe_text(rec.source)
            yield rec
        meter.finish()


def input_bytes(paths: list[str]) -> int | None:
    """The bytes `iter_records(paths)` reads: the total of its progress, or None if unknown.

    Local files count their size (an HTML folder, its HTML files); a URL, the size its
    store reports. Stdin has none, and neither has a URL whose server does not say or a list
    of more than `_MAX_SIZE_REQUESTS` URLs; one unknown size makes the total unknown. Never
    raises: a bad input is reported by the reading, not by its progress bar."""
    try:
        items = [item for path in paths for item in _expand_one(path)]
    except Exception:  # InputError, or a store that cannot list: the scan says why
        return None
    urls = [item for item in items if is_remote(item)]
    if len(urls) > _MAX_SIZE_REQUESTS or STDIN in urls:
        return None
    url_sizes: dict[str, int | None] = {}
    if urls:
        pool = ThreadPoolExecutor(_SIZE_THREADS)
        try:
            url_sizes = dict(zip(urls, pool.map(remote_size, urls), strict=True))
        finally:  # after Ctrl-C, drop the requests not yet sent rather than wait for them
            pool.shutdown(wait=False, cancel_futures=True)
    total = 0
    for item in items:
        size = url_sizes[item] if is_remote(item) else local_size(item)
        if size is None:
            return None
        total += size
    return total


def _reader(kind: str, base_url: str | None, cap: int) -> Callable[[str], Iterator[RawRecord]]:
    """The record iterator for an input kind."""
    if kind == "html_dir":
        return lambda path: iter_html_dir(path, base_url, cap)
    readers: dict[str, Callable[[str, int], Iterator[RawRecord]]] = {
        "warc": iter_warc,
        "arc": iter_arc,
        "jsonl": iter_jsonl,
        "parquet": iter_parquet,
    }
    if kind == "unreadable":
        return iter_unreadable
    read = readers[kind]
    return lambda path: read(path, cap)


def iter_unreadable(path: str) -> Iterator[RawRecord]:
    """The one row of an input that cannot be read, with the reason; never opens a FIFO."""
    reason = entry_problem(path)
    if reason is None:
        try:
            with open(path, "rb") as fh:
                fh.read(1)
            reason = "unreadable entry"
        except OSError as exc:
            reason = f"unreadable entry: {exc.strerror or exc}"
    yield RawRecord(source=path, offset=0, record_type="file", skipped_reason=reason)


__all__ = [
    "KINDS",
    "OUTPUT_MARKER",
    "InputError",
    "OnBytes",
    "detect_input_kind",
    "expand_inputs",
    "input_bytes",
    "iter_record_units",
    "iter_records",
    "neardup_outputs",
]
