"""The merges of an open index's newest segments (`files/segments.merge_plan`), each
committed as a version of its own.

A merge changes no state in memory, only which files hold it, so it runs outside the
index's lock: reads, and even the next batch, go on meanwhile. It shares with the batches
and the saves only the committed version and its lock (`committed.Committed`).
"""

from __future__ import annotations

import shutil
import threading

from neardup.index.committed import Committed
from neardup.index.files.manifest_meta import saved_at
from neardup.index.files.segments import merge_plan, write_merged
from neardup.index.files.store import Manifest, commit, segment_name
from neardup.index.memory import return_freed

TRIM_AFTER_ROWS = 65_536  # merges of at least this many rows give the freed heap back


def merge_due(committed: Committed, merging: threading.Lock) -> None:
    """Merge the newest segments while `merge_plan` asks for it; a merge already under way
    in another thread (holding `merging`) is left to finish the work."""
    if not merging.acquire(blocking=False):
        return
    try:
        merged = 0
        while (rows := merge_once(committed)) is not None:
            merged += rows
        # A large merge's blocks, freed: given back, not kept for later. Not after the
        # small ones (most of them): a trim walks the whole heap, which at a million
        # pages cost more time than the memory was worth.
        if merged >= TRIM_AFTER_ROWS:
            return_freed()
    finally:
        merging.release()


def merge_once(committed: Committed) -> int | None:
    """One merge of the newest segments `merge_plan` names: its page rows, None when no
    merge is due. Batches committed meanwhile only append segments, so the merged ones
    keep their places; their files are removed once the manifest no longer names them
    (a reader that mapped them keeps its map)."""
    store = committed.store
    with committed.lock:
        start = committed.manifest
    k = merge_plan(start.rows)
    if not k:
        return None
    names = start.segments[-k:]
    name = f"{segment_name(start.version)}-merged"  # the one merge from this version
    # It reaches the oldest segment and nothing is saved: deleted groups have nothing
    # older to hide. (A saved index's groups are older: their deletions stay.)
    oldest = len(names) == len(start.segments) and saved_at(start) is None
    try:
        merged_rows = write_merged(store, name, names, oldest)
    except FileNotFoundError:
        if committed.named_at(names) is not None:
            raise
        merged_rows = -1  # a save took them in and removed their files meanwhile
    with committed.lock:
        at = committed.named_at(names)
        if at is None or merged_rows < 0:
            # A save took the segments in meanwhile (it holds their rows): nothing to do.
            for folder in (name, f"{name}.tmp"):
                shutil.rmtree(store / folder, ignore_errors=True)
            return None
        cur = committed.manifest
        new = Manifest(
            cur.version + 1,
            [*cur.segments[:at], name, *cur.segments[at + k :]],
            [*cur.rows[:at], merged_rows, *cur.rows[at + k :]],
            cur.meta,
        )
        commit(store, new)
        committed.manifest = new
    for gone in names:
        shutil.rmtree(store / gone, ignore_errors=True)
    return merged_rows
