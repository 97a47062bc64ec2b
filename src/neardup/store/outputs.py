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
   folder and swapped in with one atomic exchange (two renames where the system has none);
   files are written to a hidden sibling and renamed over the target. A failure or a kill
   leaves the previous state, never a half-written one, and the next writer cleans what a
   killed one left (`clean_debris`).

A refusal is an `OutputError` whose message is one line that says what to do; the command
line prints it and exits with status 2.
"""

from __future__ import annotations

import ctypes
import json
import os
import shutil
import sys
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


def _folder_state(out: str | Path, inputs: Iterable[str | Path]) -> tuple[Path, bool, str | None]:
    """(resolved target, whether it holds anything, the neardup kind it holds) of a folder
    output, after refusing an overlap with an input or a file in the way."""
    check_no_overlap(out, inputs)
    target = _resolved(out)
    if target.exists() and not target.is_dir():
        raise OutputError(f"refusing to write {out}: a file of that name exists; choose a folder")
    occupied = target.is_dir() and any(target.iterdir())
    return target, occupied, marker_kind(target) if occupied else None


def check_folder(
    out: str | Path, kind: str, inputs: Iterable[str | Path] = (), force: bool = False
) -> Path:
    """Check, before any work, that a folder output of `kind` may be written at `out`.

    Returns the resolved target. Refuses (with `OutputError`) an overlap with an input, a
    file in the way, the current folder, a non-empty folder neardup did not write (even with
    `force`), and a neardup folder of another kind or without `force`."""
    target, occupied, found = _folder_state(out, inputs)
    _check_not_cwd(target, out)
    if occupied:
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
            raise OutputError(f"{out} already holds a neardup {kind}; pass --force to replace it")
    return target


def _sibling(target: Path, tag: str) -> Path:
    return target.parent / f".{target.name}.{tag}-{os.getpid()}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, someone else's
        return True
    return True


def clean_debris(target: Path) -> list[Path]:
    """Remove what a killed writer left beside `target`, and put back an output it had moved.

    A writer killed with SIGKILL (the OOM killer's way) cannot clean up: its staging folder
    `.NAME.staging-PID` stays, and where publishing fell back to two renames, a kill between
    them leaves the previous output as `.NAME.old-PID` and nothing at `NAME`. Only entries
    of dead processes are touched. Returns the paths removed or restored."""
    touched: list[Path] = []
    if not target.parent.is_dir():
        return touched
    prefix = f".{target.name}."
    for entry in target.parent.iterdir():
        tag, _, pid = entry.name[len(prefix) :].rpartition("-")
        if not entry.name.startswith(prefix) or tag not in ("staging", "old", "tmp"):
            continue
        if not pid.isdigit() or _pid_alive(int(pid)):
            continue
        if tag == "old" and not target.exists() and marker_kind(entry) is not None:
            entry.rename(target)  # the previous output, moved away by a killed publish
        elif entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()
        touched.append(entry)
    return touched


_RENAME_EXCHANGE = 2  # linux/fs.h


def _exchange(a: Path, b: Path) -> bool:
    """Swap two paths in one atomic step (Linux renameat2 RENAME_EXCHANGE); False where the
    system or file system cannot, so the caller falls back to two renames."""
    if sys.platform != "linux":
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    done = renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), _RENAME_EXCHANGE)
    return done == 0


def _publish(staging: Path, target: Path) -> None:
    """Put `staging` at `target`: one atomic swap where the system allows it, so a reader or
    a kill sees the old output or the new one, never neither."""
    if not target.exists():
        staging.rename(target)
        return
    if _exchange(staging, target):
        shutil.rmtree(staging)  # now the previous output
        return
    old = _sibling(target, "old")
    target.rename(old)
    staging.rename(target)
    shutil.rmtree(old)


@contextmanager
def replacing_folder(
    out: str | Path, kind: str, inputs: Iterable[str | Path] = (), force: bool = False
) -> Iterator[Path]:
    """Yield an empty staging folder; on success it replaces `out` in one atomic swap.

    The checks of `check_folder` come first, after the debris of killed writers is cleaned.
    The previous output, if any (and only when it is neardup's own, as checked), is removed
    after the new one is in place; on any error the staging folder is removed and `out` is
    left as it was."""
    clean_debris(_resolved(out))
    target = check_folder(out, kind, inputs, force)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = _sibling(target, "staging")
    if staging.exists():
        shutil.rmtree(staging)
    staging.mkdir()
    try:
        yield staging
        write_marker(staging, kind)
        if target.exists():
            check_folder(out, kind, inputs, force=True)  # nothing new arrived meanwhile
        _publish(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def open_folder(out: str | Path, kind: str, inputs: Iterable[str | Path] = ()) -> Path:
    """Create or reopen a folder that neardup keeps adding to (a store of crawls, a service
    index): new, empty, or already marked with `kind`; never a folder of the user's."""
    target, occupied, found = _folder_state(out, inputs)
    if occupied and found != kind:
        what = "files neardup did not write" if found is None else f"a neardup {found}"
        raise OutputError(
            f"refusing to write {out}: it holds {what}, not a {kind}; choose a new or empty folder"
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
            raise OutputError(f"{out} exists; pass --force to replace it")
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
