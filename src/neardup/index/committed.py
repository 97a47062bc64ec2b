"""The last committed version of an open index, as its process holds it: the manifest, the
saved graph and the graph's changes it names, how many rows were written since the save,
and the lock every commit takes.

Why a record of its own: a batch's commit, a merge (outside the index's lock, in whichever
thread finished a batch) and a save of the graph each read the manifest and replace it;
they share this record and its lock, and nothing else of the index, so each is a function
of it (`merges.py`, `index_saves.py`) and not a method of the index.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from neardup.index.files.manifest_meta import version_meta
from neardup.index.files.saves import write_segment
from neardup.index.files.segment_rows import segment_rows
from neardup.index.files.store import Manifest, commit, segment_name
from neardup.index.state.index_state import IndexState


def _none_written() -> list[np.ndarray]:
    return [np.empty(0, np.int64)]


@dataclass(eq=False)
class Committed:
    """The committed version of the index in the folder `store` (see above)."""

    store: Path
    lock: threading.Lock = field(default_factory=threading.Lock)  # the manifest's commits
    manifest: Manifest = field(default_factory=Manifest)
    graph_meta: dict[str, Any] | None = None  # the saved graph the version names
    changes_meta: dict[str, Any] | None = None  # the graph's changes since that save
    graph_tail: int = 0  # page rows written since the save
    replay_tail: int = 0  # of them, those the next opening replays (after the changes)
    # The slots of the page rows written since the save the page table was opened from:
    # the rows the next save takes from memory (`PageTable.saved_arrays`).
    written: list[np.ndarray] = field(default_factory=_none_written)

    def meta(self, state: IndexState) -> dict[str, Any]:
        """The `meta` of the next version: the state's settings, options, next group and
        length grid, with the saved graph and changes this version names."""
        return version_meta(
            state.settings,
            state.options,
            state.next_group,
            self.graph_meta,
            self.changes_meta,
            state.store_rows,
        )

    def commit_batch(
        self, state: IndexState, dirty: set[str], groups: set[int], dropped: set[int]
    ) -> None:
        """Commit a batch: its touched page and group rows as a new segment, then the
        manifest naming it (the commit point)."""
        with self.lock:
            old = self.manifest
            version = old.version + 1
            seg = segment_rows(
                state.pages, state.groups, state.winners, dirty, groups, dropped, version
            )
            self.graph_tail += seg.pages.num_rows
            self.replay_tail += seg.pages.num_rows
            self.written.append(seg.pages.column("slot").to_numpy())
            name = segment_name(version)
            write_segment(self.store, name, seg, hook=True)
            new = Manifest(
                version, [*old.segments, name], [*old.rows, seg.pages.num_rows], self.meta(state)
            )
            commit(self.store, new)
            self.manifest = new

    def named_at(self, names: list[str]) -> int | None:
        """Where the committed version names the segments `names`, in a row; None when it
        does not (a save took them in)."""
        segments = self.manifest.segments
        at = segments.index(names[0]) if names[0] in segments else -1
        return at if at >= 0 and segments[at : at + len(names)] == names else None
