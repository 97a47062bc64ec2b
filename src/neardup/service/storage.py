"""How the service index lies in DuckDB: the page rows, their in-memory copy, the write.

The schema is in `service/sql/schema.sql`; this module writes the rows a batch touched and
states the invariants the stored state must keep, so that a crash test can check them.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from datetime import datetime, timezone

import duckdb
import numpy as np
import pyarrow as pa

from neardup.kernels import fingerprint64
from neardup.store.sql_files import package_sql

DB_NAME = "service.duckdb"
SERVICE_KIND = "service index"
# Test hook: seconds to sleep inside the transaction (after the pages were rewritten, before
# the group rows), printing a marker first, so a test can kill the process mid-batch.
SLEEP_HOOK = "NEARDUP_SERVICE_SLEEP_IN_TX"
TX_MARKER = "neardup-service: inside transaction"
MAX_REDIRECTS = 32


def _sql(name: str) -> str:
    return package_sql("service/sql", name)


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


def write_rows(
    con: duckdb.DuckDBPyConnection,
    pages: dict[str, _Page],
    members: dict[int, set[str]],
    winners: dict[int, str],
    dirty: set[str],
    groups: set[int],
    dropped: set[int],
) -> None:
    """Rewrite the touched page rows (`dirty`) and group rows (`groups`; `dropped` are
    deleted first) inside the caller's transaction. `members` and `winners` are the
    index's groups."""
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = [pages[u] for u in sorted(dirty)]
    table = pa.table(
        {
            "url": [p.url for p in rows],
            "doc_key": pa.array(
                [fingerprint64(p.url.encode("utf-8", "surrogatepass")) for p in rows],
                pa.int64(),
            ),
            "group_id": pa.array([p.group_id for p in rows], pa.int64()),
            "length": pa.array([p.length for p in rows], pa.int32()),
            "signature": pa.array(
                [
                    None if p.signature is None else p.signature.astype("<u4").tobytes()
                    for p in rows
                ],
                pa.binary(),
            ),
            "exact_fp": pa.array([p.exact_fp for p in rows], pa.int64()),
            "redirect_to": pa.array([p.redirect_to for p in rows], pa.string()),
            "links_in": pa.array([p.links_in for p in rows], pa.int32()),
            "verified": pa.array([p.verified for p in rows], pa.bool_()),
            "updated_at": pa.array([now] * len(rows), pa.timestamp("us")),
            "removed": pa.array([p.removed for p in rows], pa.bool_()),
            "dim_lengths": pa.array(
                [None if p.lengths is None else p.lengths.tolist() for p in rows],
                pa.list_(pa.int32()),
            ),
            "shingle_fp": pa.array([p.shingle_fp for p in rows], pa.int64()),
            "n_tokens": pa.array([p.n_tokens for p in rows], pa.int32()),
        }
    )
    con.register("_svc_pages", table)
    con.execute("DELETE FROM pages WHERE url IN (SELECT url FROM _svc_pages)")
    con.execute("INSERT INTO pages BY NAME SELECT * FROM _svc_pages")
    con.unregister("_svc_pages")
    hook = os.environ.get(SLEEP_HOOK)
    if hook:
        print(TX_MARKER, flush=True)
        print(TX_MARKER, file=sys.stderr, flush=True)
        time.sleep(float(hook))
    gids = sorted(groups)
    gtable = pa.table(
        {
            "group_id": pa.array(gids, pa.int64()),
            "winner_url": [winners[g] for g in gids],
            "winner_signature": pa.array(
                [pages[winners[g]].signature.astype("<u4").tobytes() for g in gids],
                pa.binary(),
            ),
            "size": pa.array([len(members[g]) for g in gids], pa.int32()),
            "failed": pa.array(
                [sum(not pages[u].verified for u in members[g]) for g in gids],
                pa.int32(),
            ),
            "updated_at": pa.array([now] * len(gids), pa.timestamp("us")),
        }
    )
    con.register("_svc_groups", gtable)
    con.register("_svc_dropped", pa.table({"group_id": pa.array(sorted(dropped), pa.int64())}))
    con.execute("DELETE FROM groups WHERE group_id IN (SELECT group_id FROM _svc_dropped)")
    con.execute("INSERT INTO groups SELECT * FROM _svc_groups")
    con.unregister("_svc_groups")
    con.unregister("_svc_dropped")


def invariant_errors(con: duckdb.DuckDBPyConnection) -> list[str]:
    """Invariants of the stored state (used by tests and after a crash)."""
    errs = []
    for sql, what in _INVARIANTS:
        count = con.execute(sql).fetchone()[0]
        if count:
            errs.append(f"{count} {what}")
    return errs
