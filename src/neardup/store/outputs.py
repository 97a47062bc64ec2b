"""The one rule every writing command obeys: never destroy a file neardup did not write.

Every command and API call that writes (`scan`, `dedup`, `crawl`, `add`, `report`,
`demo-crawl`) goes through this module, so the rule lives in one place:

1. **No overlap.** An output never overlaps an input: not the same file, not the same
   folder, not one inside the other, compared after resolving symlinks. Writing a
   deduplicated copy "over" its own input would truncate the crawl it reads.
2. **`force` replaces only neardup's own work.** A folder neardup wrote carries a marker
   file (`.neardup-output`, naming the kind of output). An existing non-empty folder without
   it is never emptied, whatever the flags; with it, `force` may replace it. A file output
   (the HTML report) is replaced only when it is one neardup wrote (it carries the marker
   in its text).
3. **Built beside, renamed into place.** Folders are assembled in a hidden sibling staging
   folder and swapped in with renames; files are written to a hidden sibling and renamed
   over the target. A failure or a kill leaves the previous state, never a half-written one.

A refusal is an `OutputError` whose message is one line that says what to do; the command
line prints it and exits with status 2.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

MARKER = ".neardup-output"
FILE_MARKER = "neardup-output"  # carried inside single-file outputs (a meta tag in HTML)

# Runs written before the marker existed hold only these names; such a folder is still
# recognised as a run so that `--force` can replace it.
_LEGACY_RUN_NAMES = frozenset(
    {
        "avoid.parquet",
        "avoid_list.parquet",
        "band_index.json",
        "band_keys.npy",
        "band_rows.npy",
        "clusters.parquet",
        "collection_clusters.parquet",
        "collection_copies.parquet",
        "collection_pages.parquet",
        "collections.parquet",
        "common_shingles.npy",
        "containment.parquet",
        "links.parquet",
        "mirrors.parquet",
        "mirrors_suffix_method.parquet",
        "moved.parquet",
        "neardup.duckdb",
        "neardup.duckdb.wal",
        "page_text.parquet",
        "pages.parquet",
        "pairs.parquet",
        "settings.json",
        "signature_docs.npy",
        "signatures.npy",
        "sketches.parquet",
        "summary.json",
        "supershingles.npy",
    }
)


class OutputError(FileExistsError):
    """An output that would overlap an input or replace something neardup did not write."""


OutputExistsError = OutputError  # the name earlier releases raised


def _resolved(path: str | Path) -> Path:
    """The absolute path with every symlink resolved (the path need not exist)."""
    return Path(os.path.abspath(Path(path).expanduser())).resolve()


def _is_local(path: str | Path) -> bool:
    return "://" not in str(path)


def check_no_overlap(out: str | Path, inputs: Iterable[str | Path]) -> None:
    """Refuse an output that is, contains, or lies inside one of `inputs`.

    Paths are compared after resolving symlinks, so a link to the input folder or an input
    reached through a linked folder is caught too. Remote inputs (URLs) cannot overlap a
    local output and are ignored."""
    target = _resolved(out)
    for raw in inputs:
        if not _is_local(raw):
            continue
        for source in {_resolved(raw), Path(os.path.abspath(raw))}:
            if target == source:
                why = "is the input"
            elif source.is_relative_to(target):
                why = "contains the input"
            elif target.is_relative_to(source):
                why = "is inside the input"
            else:
                continue
            raise OutputError(
                f"refusing to write {out}: it {why} {raw}; choose an output outside the inputs"
            )


def marker_kind(folder: Path) -> str | None:
    """The kind of output neardup recorded in `folder`, or None when it holds no marker."""
    marker = folder / MARKER
    if not marker.is_file():
        return _legacy_kind(folder) if folder.is_dir() else None
    try:
        return str(json.loads(marker.read_text(encoding="utf-8"))["kind"])
    except (ValueError, KeyError, TypeError, OSError):
        return None


def _legacy_kind(folder: Path) -> str | None:
    """The kind of a folder written before markers existed, recognised by its own files:
    a run holds only run files; a store of crawls has its listing and crawl folders; a
    service index has its database."""
    names = {p.name for p in folder.iterdir()}
    if {"summary.json", "settings.json", "neardup.duckdb"} <= names <= _LEGACY_RUN_NAMES:
        return "run"
    if "crawls.json" in names and (folder / "crawls").is_dir():
        return "store of crawls"
    if names <= {"service.duckdb", "service.duckdb.wal"} and names:
        return "service index"
    return None


def write_marker(folder: Path, kind: str) -> None:
    (folder / MARKER).write_text(json.dumps({"kind": kind}) + "\n", encoding="utf-8")


def _check_not_cwd(out: Path, shown: str | Path) -> None:
    here = _resolved(Path.cwd())
    if here == out or here.is_relative_to(out):
        raise OutputError(
            f"refusing to write {shown}: it is the folder you are in (or holds it); "
            f"name a new folder instead, such as {Path(shown) / 'run'}"
        )


def check_folder(
    out: str | Path, kind: str, inputs: Iterable[str | Path] = (), force: bool = False
) -> Path:
    """Check, before any work, that a folder output of `kind` may be written at `out`.

    Returns the resolved target. Refuses (with `OutputError`) an overlap with an input, a
    file in the way, the current folder, a non-empty folder neardup did not write (even with
    `force`), and a neardup folder of another kind or without `force`."""
    check_no_overlap(out, inputs)
    target = _resolved(out)
    _check_not_cwd(target, out)
    if target.exists() and not target.is_dir():
        raise OutputError(f"refusing to write {out}: a file of that name exists; choose a folder")
    if target.is_dir() and any(target.iterdir()):
        found = marker_kind(target)
        if found is None:
            raise OutputError(
                f"refusing to write {out}: it holds files neardup did not write "
                "(--force replaces only neardup's own output); choose a new or empty folder"
            )
        if found != kind:
            raise OutputError(
                f"refusing to write {out}: it holds a neardup {found}, not a {kind}; "
                "choose another folder"
            )
        if not force:
            raise OutputError(
                f"{out} already holds a neardup {kind}; use --force (force=True) to replace it"
            )
    return target


def _sibling(target: Path, tag: str) -> Path:
    return target.parent / f".{target.name}.{tag}-{os.getpid()}"


@contextmanager
def replacing_folder(
    out: str | Path, kind: str, inputs: Iterable[str | Path] = (), force: bool = False
) -> Iterator[Path]:
    """Yield an empty staging folder; on success it becomes `out` in one rename.

    The checks of `check_folder` come first. The previous output, if any (and only when it
    is neardup's own, as checked), is removed after the new one is in place; on any error
    the staging folder is removed and `out` is left as it was."""
    target = check_folder(out, kind, inputs, force)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _sibling(target, "staging")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    try:
        yield staging
        write_marker(staging, kind)
        old = _sibling(target, "old")
        if target.exists():
            check_folder(out, kind, inputs, force=True)  # nothing new arrived meanwhile
            target.rename(old)
        staging.rename(target)
        if old.exists():
            shutil.rmtree(old)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def open_folder(out: str | Path, kind: str, inputs: Iterable[str | Path] = ()) -> Path:
    """Create or reopen a folder that neardup keeps adding to (a store of crawls, a service
    index): new, empty, or already marked with `kind`; never a folder of the user's."""
    check_no_overlap(out, inputs)
    target = _resolved(out)
    if target.exists() and not target.is_dir():
        raise OutputError(f"refusing to write {out}: a file of that name exists; choose a folder")
    if target.is_dir() and any(target.iterdir()):
        found = marker_kind(target)
        if found != kind:
            what = "files neardup did not write" if found is None else f"a neardup {found}"
            raise OutputError(
                f"refusing to write {out}: it holds {what}, not a {kind}; "
                "choose a new or empty folder"
            )
    target.mkdir(parents=True, exist_ok=True)
    if not (target / MARKER).is_file():
        write_marker(target, kind)
    return target


def check_file(out: str | Path, inputs: Iterable[str | Path] = (), force: bool = False) -> Path:
    """Check that a single-file output may be written at `out` (see `replacing_file`)."""
    check_no_overlap(out, inputs)
    target = _resolved(out)
    if target.is_dir():
        raise OutputError(f"refusing to write {out}: it is a folder; name a file")
    if target.exists():
        if not _file_is_ours(target):
            raise OutputError(
                f"refusing to write {out}: the file exists and neardup did not write it; "
                "choose another name"
            )
        if not force:
            raise OutputError(f"{out} exists; use --force (force=True) to replace it")
    return target


def _file_is_ours(path: Path) -> bool:
    with path.open("rb") as fh:
        head = fh.read(4096)
    return FILE_MARKER.encode() in head


@contextmanager
def replacing_file(
    out: str | Path, inputs: Iterable[str | Path] = (), force: bool = False
) -> Iterator[Path]:
    """Yield a hidden sibling path to write; on success it is renamed over `out`.

    The file written must carry `FILE_MARKER` within its first 4 KiB, so that a later
    `force` recognises it as neardup's own."""
    target = check_file(out, inputs, force)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _sibling(target, "tmp")
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def replace_file_atomically(target: Path, data: bytes) -> None:
    """Write `data` to a sibling and rename it over `target` (for files inside neardup's own
    folders, such as a store's listing)."""
    tmp = _sibling(target, "tmp")
    try:
        tmp.write_bytes(data)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
