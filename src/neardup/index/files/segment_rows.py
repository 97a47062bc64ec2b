"""The service index's page rows: the rows a batch writes, the invariants they keep.

The files are described in `files/store.py`; this module turns the pages a batch touched into
one segment's rows and states the invariants the stored state must keep, so that a crash
test can check them.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from neardup.index.files.store import GROUP_SCHEMA, PAGE_SCHEMA, SLEEP_HOOK, TX_MARKER, Segment
from neardup.index.state.groups import GroupMembers, Winners
from neardup.index.state.pages import PageTable

SERVICE_KIND = "service index"
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


def segment_rows(
    pages: PageTable,
    members: GroupMembers,
    winners: Winners,
    dirty: set[str],
    groups: set[int],
    dropped: set[int],
    version: int,
) -> Segment:
    """The rows a batch rewrote, as one segment: the touched pages (`dirty`), the touched
    groups (`groups`) and a deleting row for each of `dropped` that is not among them.
    `members` and `winners` are the index's groups; `version` the one the batch commits
    (which rows are newer than the saved graph, `scangraph.ScanGraph.replay`). Whole
    columns are taken from the page table at the touched slots."""
    urls = sorted(dirty)
    slots = np.array([pages.slot(u) for u in urls], dtype=np.int64)
    has = pages.has_sig[slots]
    table = pa.table(
        {
            "url": pa.array(urls, pa.string()),
            "group_id": pa.array(pages.group[slots], pa.int64(), mask=pages.group[slots] < 0),
            "length": pa.array(pages.length[slots], pa.int32()),
            "has_signature": pa.array(has, pa.bool_()),
            "exact_fp": pa.array(pages.exact_fp[slots], pa.int64(), mask=~pages.has_fp[slots]),
            "redirect_to": pa.array([pages.redirect.get(s) for s in slots.tolist()], pa.string()),
            "links_in": pa.array(pages.links_in[slots], pa.int32()),
            "verified": pa.array(pages.verified[slots], pa.bool_()),
            "removed": pa.array(pages.removed[slots], pa.bool_()),
            "shingle_fp": pa.array(pages.shingle_fp[slots], pa.int64(), mask=~pages.has_sfp[slots]),
            "page_key": pa.array(pages.key[slots], pa.int64()),
            "n_tokens": pa.array(pages.n_tokens[slots], pa.int32()),
            "slot": pa.array(slots, pa.int64()),
            "version": pa.array(np.full(slots.size, version, np.int64)),
        },
        schema=PAGE_SCHEMA,
    )
    sigs = pages.sigs[slots]
    lens = pages.lens[slots]
    gids = sorted(groups)
    gone = sorted(dropped - groups)
    verified = pages.verified
    gtable = pa.table(
        {
            "group_id": pa.array(gids + gone, pa.int64()),
            "winner_url": pa.array([winners[g] for g in gids] + [None] * len(gone), pa.string()),
            "size": pa.array([len(members[g]) for g in gids] + [0] * len(gone), pa.int32()),
            "failed": pa.array(
                [sum(not verified[pages.slot(u)] for u in members[g]) for g in gids]
                + [0] * len(gone),
                pa.int32(),
            ),
        },
        schema=GROUP_SCHEMA,
    )
    return Segment(table, sigs, lens, gtable)


def invariant_errors(state: Segment) -> list[str]:
    """Invariants of a committed state (used by tests and after a crash), checked in DuckDB
    over its page and group rows (imported here: no write or read of an index needs it)."""
    import duckdb

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
