"""Page rows as read from the segments (`store.PAGE_SCHEMA`, Arrow) turned into the page
table's columns: each column in numpy, the order that puts the rows at their slots, the
redirects' targets by slot.

Why apart from the table: this is the one place that knows the segments' row layout (its
column names, nulls for fields a page lacks, rows of older files without a slot or a page
key); the table (`pages.PageTable`) knows only its columns by slot.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from neardup.index.state.page_ref import NO_GROUP
from neardup.pipeline.steps.near_pairs import url_key

# The page table's columns by slot and their dtypes, as a page row's fields fill them
# (`row_columns`).
COLUMN_DTYPES: dict[str, type] = {
    "group": np.int64,
    "length": np.int32,
    "has_sig": bool,
    "exact_fp": np.int64,
    "has_fp": bool,
    "links_in": np.int32,
    "verified": bool,
    "removed": bool,
    "shingle_fp": np.int64,
    "has_sfp": bool,
    "n_tokens": np.int32,
    "key": np.int64,
}
COLUMNS = tuple(COLUMN_DTYPES)


def row_columns(rows: pa.Table) -> dict[str, np.ndarray]:
    """The page table's columns (`COLUMNS`) of page rows (`store.PAGE_SCHEMA`),
    in the rows' order; the page key of a row stored without one (older files) hashed from
    its URL."""

    def col(name: str, fill: int) -> np.ndarray:
        c = rows.column(name)
        return c.fill_null(fill).to_numpy() if c.null_count else c.to_numpy()

    def valid(name: str) -> np.ndarray:
        c = rows.column(name)
        return c.is_valid().to_numpy() if c.null_count else np.ones(rows.num_rows, bool)

    key = col("page_key", 0).copy()
    missing = np.flatnonzero(~valid("page_key"))
    if missing.size:
        got = rows.column("url").take(pa.array(missing)).to_pylist()
        key[missing] = [url_key(u) for u in got]
    return {
        "group": col("group_id", NO_GROUP),
        "length": col("length", 0),
        "has_sig": col("has_signature", False),
        "exact_fp": col("exact_fp", 0),
        "has_fp": valid("exact_fp"),
        "links_in": col("links_in", 0),
        "verified": col("verified", False),
        "removed": col("removed", False),
        "shingle_fp": col("shingle_fp", 0),
        "has_sfp": valid("shingle_fp"),
        "n_tokens": col("n_tokens", 0),
        "key": key,
    }


def one_array(column: pa.ChunkedArray) -> pa.Array:
    """A column's chunks as one Arrow array (an empty one for a column of no chunk, which
    some pyarrow releases leave chunked)."""
    got = column.combine_chunks()
    return pa.array([], column.type) if isinstance(got, pa.ChunkedArray) else got


def slot_order(rows: pa.Table) -> np.ndarray | None:
    """The order that puts page rows at their slots (the `slot` column), None when they are
    already there; rows of an older neardup have no slot and take their row's place (the
    writer then saves them once with slots, `files/legacy.give_slots`)."""
    col = rows.column("slot")
    if col.null_count or not rows.num_rows:
        return None
    slots = col.to_numpy()
    if (np.diff(slots) > 0).all() and slots[0] == 0 and slots[-1] == slots.size - 1:
        return None
    order = np.argsort(slots, kind="stable")
    if not np.array_equal(slots[order], np.arange(slots.size)):
        raise ValueError("the index's page slots are not 0 .. n-1: its files are damaged")
    return order


def redirects_by_slot(rows: pa.Table, order: np.ndarray | None) -> dict[int, str]:
    """slot -> target of the rows that redirect (`order`: `slot_order`'s; None: the row's
    place is its slot)."""
    redirect = rows.column("redirect_to")
    if redirect.null_count == rows.num_rows:
        return {}
    has = np.flatnonzero(redirect.is_valid().to_numpy(zero_copy_only=False))
    slots = has if order is None else rows.column("slot").to_numpy()[has]
    targets = redirect.take(pa.array(has)).to_pylist()
    return {s: t for s, t in zip(slots.tolist(), targets, strict=True) if t}


def rewrite_redirects(
    redirect: dict[int, str], slots: np.ndarray, targets: pa.ChunkedArray
) -> None:
    """Bring `redirect` (slot -> target) to the rows of `slots` written again: a row whose
    target is null or empty no longer redirects."""
    given = np.flatnonzero(targets.is_valid().to_numpy(zero_copy_only=False))
    chosen = dict(zip(slots[given].tolist(), targets.take(given).to_pylist(), strict=True))
    if redirect:  # the rows that no longer redirect
        for slot in slots.tolist():
            if not chosen.get(slot):
                redirect.pop(slot, None)
    redirect.update((slot, target) for slot, target in chosen.items() if target)
