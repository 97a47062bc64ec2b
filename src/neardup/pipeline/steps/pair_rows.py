"""The rows of the `pairs` table by parts: verified edges and identical pages, each part
sorted, merged a window of pages at a time (issue 47, item 4).

The table is every verified edge (a, b) between class representatives and one `identical`
row (representative, member) per page collapsed into a class, ordered by (doc_a, doc_b).
Positions follow doc ids, so that order is the order of (a, b). Each part (a verification
part's edges, a class part's identical rows) is sorted by (a, b) where it is made, and the
table is written a window of `WINDOW_PAGES` values of `a` at a time: each part's rows of the
window (found by one `searchsorted` per part) put together and sorted. The writer holds one
window's rows, not the table: the near stage by parts (`steps.near_parts`) reads the parts
from mapped files a slice at a time, and the stage in one process hands its arrays over as
one part each, so both write the table the same way.

A part is any 1-d array of `PAIR_DTYPE` rows that can be sliced and measured: an array, or
a `MappedRows` over a `.npy` file, which maps the file for each read only.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

PAIR_DTYPE = np.dtype(
    [("a", "<i8"), ("b", "<i8"), ("similarity", "<f4"), ("agree", "i1"), ("identical", "?")]
)
# Values of `a` (positions of pages) a window covers: at about one row a page for the
# densest crawls, some 6 MiB of rows and the window's table, whatever the crawl's size.
WINDOW_PAGES = 1 << 18

PAIRS_SCHEMA = pa.schema(
    [
        ("doc_a", pa.int64()),
        ("doc_b", pa.int64()),
        ("similarity", pa.float32()),
        ("supershingles_agree", pa.int8()),
        ("kind", pa.string()),
    ]
)


class Rows(Protocol):
    """What a part or a per-page array must offer: its length and a copy of a slice or of
    the rows at some positions (`np.ndarray` and `store.rows.MappedRows` both do)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: slice | np.ndarray, /) -> np.ndarray: ...


def edge_rows(
    a: np.ndarray, b: np.ndarray, similarity: np.ndarray, agree: np.ndarray
) -> np.ndarray:
    """Verified edges as `PAIR_DTYPE` rows sorted by (a, b). The sort is stable, so edges
    given twice keep their order, as the one lexsort of the whole table kept them."""
    rows = np.empty(a.size, dtype=PAIR_DTYPE)
    rows["a"], rows["b"] = a, b
    rows["similarity"] = np.asarray(similarity).astype(np.float32)
    rows["agree"] = agree
    rows["identical"] = False
    return rows[np.lexsort((rows["b"], rows["a"]))]


def identical_rows(positions: np.ndarray, reps: np.ndarray) -> np.ndarray:
    """The `identical` rows (representative, page) of the pages at `positions` whose class
    representative `reps` is another page, sorted by (a, b): similarity 1, no agreement."""
    members = reps != positions
    rows = np.empty(int(members.sum()), dtype=PAIR_DTYPE)
    rows["a"], rows["b"] = reps[members], positions[members]
    rows["similarity"] = 1.0
    rows["agree"] = -1
    rows["identical"] = True
    return rows[np.lexsort((rows["b"], rows["a"]))]


def window_bounds(part: Rows, pages: int, window: int = WINDOW_PAGES) -> np.ndarray:
    """Where each window of `a` values starts in `part` (sorted by a), and its end: the
    part's `a` column in memory for one `searchsorted`, then let go."""
    starts = np.append(np.arange(0, pages, window, dtype=np.int64), pages)
    return np.searchsorted(part[0 : len(part)]["a"], starts)


def merged_windows(
    parts: Sequence[Rows], pages: int, window: int = WINDOW_PAGES
) -> Iterator[np.ndarray]:
    """The rows of all `parts` in (a, b) order, a window of `a` values at a time. Within
    a window the parts' rows are concatenated in the parts' order and sorted stably."""
    bounds = [window_bounds(part, pages, window) for part in parts]
    for w in range(-(-pages // window)):
        pieces = [
            part[int(at[w]) : int(at[w + 1])]
            for part, at in zip(parts, bounds, strict=True)
            if at[w + 1] > at[w]
        ]
        if pieces:
            rows = np.concatenate(pieces)
            yield rows[np.lexsort((rows["b"], rows["a"]))]


def write_pair_rows(
    path: Path, docs: Rows, parts: Sequence[Rows], pages: int, window: int = WINDOW_PAGES
) -> int:
    """`pairs.parquet` from the sorted `parts` (`docs`: the doc id of each of the `pages`
    positions); the number of rows written."""
    written = 0
    with pq.ParquetWriter(path, PAIRS_SCHEMA, compression="zstd") as writer:
        for rows in merged_windows(parts, pages, window):
            agree = rows["agree"]
            kind = np.where(rows["identical"], "identical", "near")
            writer.write_table(
                pa.table(
                    {
                        "doc_a": docs[rows["a"]],
                        "doc_b": docs[rows["b"]],
                        "similarity": rows["similarity"],
                        "supershingles_agree": pa.array(agree, mask=agree < 0),
                        "kind": pa.array(kind, pa.string()),
                    },
                    schema=PAIRS_SCHEMA,
                )
            )
            written += rows.size
    return written
