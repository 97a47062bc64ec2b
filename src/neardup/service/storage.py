"""The service index's page rows: their in-memory copy, the rows a batch writes.

The files are described in `layout.py`; this module turns the pages a batch touched into
one segment's rows and states the invariants the stored state must keep, so that a crash
test can check them.
"""

from __future__ import annotations

from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa

from neardup.service.layout import (
    GROUP_SCHEMA,
    PAGE_SCHEMA,
    SLEEP_HOOK,
    TX_MARKER,
    Segment,
)

SERVICE_KIND = "service index"
MAX_REDIRECTS = 32
__all__ = ["SLEEP_HOOK", "TX_MARKER"]  # the crash test's hook, defined with the files


# Each query counts the rows that break one invariant of the stored state.
_INVARIANTS: tuple[tuple[str, str], ...] = (
    ("SELECT count(*) - count(DISTINCT url) FROM pages", "duplicate page rows"),
    (
        "SELECT count(*) FROM pages p WHERE group_id IS NOT NULL AND NOT removed AND "
        "group_id NOT IN (SELECT group_id FROM groups)",
        "pages in unknown groups",
    ),
    (
        "SELECT count(*) FROM groups g WHERE winner_url NOT IN "
        "(SELECT url FROM pages WHERE group_id = g.group_id AND NOT removed)",
        "groups whose winner is not a member",
    ),
    (
        "SELECT count(*) FROM groups g WHERE size <> (SELECT count(*) FROM pages "
        "WHERE group_id = g.group_id AND NOT removed)",
        "groups with a wrong size",
    ),
    (
        "SELECT count(*) FROM pages WHERE NOT removed AND redirect_to IS NULL AND group_id IS NULL",
        "live pages without a group",
    ),
)


@dataclass(slots=True)  # a million of them: no per-object dict
class _Page:
    """The in-memory copy of one `pages` row: the index keeps every row in a dict, so that
    a batch looks pages up without a query and writes back only those it changed."""

    url: str
    group_id: int | None = None
    length: int = 0
    signature: np.ndarray | None = None
    lengths: np.ndarray | None = None  # N sub-dictionary lengths (tier-2 partition key)
    exact_fp: int | None = None
    redirect_to: str | None = None
    links_in: int = 0
    verified: bool = False
    removed: bool = False
    shingle_fp: int | None = None  # shingle-set fingerprint: the scan's equivalence classes
    n_tokens: int = 0  # words, for the scan's `min_tokens`


def segment_rows(
    pages: dict[str, _Page],
    members: dict[int, set[str]],
    winners: dict[int, str],
    dirty: set[str],
    groups: set[int],
    dropped: set[int],
    keys: dict[str, int],
    num_perm: int,
    dims: int,
) -> Segment:
    """The rows a batch rewrote, as one segment: the touched pages (`dirty`), the touched
    groups (`groups`) and a deleting row for each of `dropped` that is not among them.
    `members` and `winners` are the index's groups, `keys` the scan graph's page keys."""
    rows = [pages[u] for u in sorted(dirty)]
    sigs = np.zeros((len(rows), num_perm), dtype=np.uint32)
    lens = np.zeros((len(rows), dims), dtype=np.int32)
    for i, p in enumerate(rows):
        if p.signature is not None:
            sigs[i] = p.signature
        if p.lengths is not None and p.lengths.size == dims:
            lens[i] = p.lengths
    table = pa.table(
        {
            "url": pa.array([p.url for p in rows], pa.string()),
            "group_id": pa.array([p.group_id for p in rows], pa.int64()),
            "length": pa.array([p.length for p in rows], pa.int32()),
            "has_signature": pa.array([p.signature is not None for p in rows], pa.bool_()),
            "exact_fp": pa.array([p.exact_fp for p in rows], pa.int64()),
            "redirect_to": pa.array([p.redirect_to for p in rows], pa.string()),
            "links_in": pa.array([p.links_in for p in rows], pa.int32()),
            "verified": pa.array([p.verified for p in rows], pa.bool_()),
            "removed": pa.array([p.removed for p in rows], pa.bool_()),
            "shingle_fp": pa.array([p.shingle_fp for p in rows], pa.int64()),
            "page_key": pa.array([keys.get(p.url) for p in rows], pa.int64()),
            "n_tokens": pa.array([p.n_tokens for p in rows], pa.int32()),
        },
        schema=PAGE_SCHEMA,
    )
    gids = sorted(groups)
    gone = sorted(dropped - groups)
    gtable = pa.table(
        {
            "group_id": pa.array(gids + gone, pa.int64()),
            "winner_url": pa.array([winners[g] for g in gids] + [None] * len(gone), pa.string()),
            "size": pa.array([len(members[g]) for g in gids] + [0] * len(gone), pa.int32()),
            "failed": pa.array(
                [sum(not pages[u].verified for u in members[g]) for g in gids] + [0] * len(gone),
                pa.int32(),
            ),
        },
        schema=GROUP_SCHEMA,
    )
    return Segment(table, sigs, lens, gtable)


def invariant_errors(state: Segment) -> list[str]:
    """Invariants of a committed state (used by tests and after a crash), checked in DuckDB
    over its page and group rows."""
    errs = []
    con = duckdb.connect()
    try:
        con.register("pages", state.pages)
        con.register("groups", state.groups)
        for sql, what in _INVARIANTS:
            count = con.execute(sql).fetchone()[0]
            if count:
                errs.append(f"{count} {what}")
    finally:
        con.close()
    return errs
