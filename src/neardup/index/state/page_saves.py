"""The page table as a save holds it (issue 27: an index opens without reading its pages):
the arrays handed to the files (`page_arrays`) and their names (`PAGE_ARRAYS`), which
`PageTable.from_saved` maps back.

Why apart from the table: what a save holds is a contract with the files (`files/saves.py`
writes these shapes, `store.read_arrays` maps them by these names), read off the table's
columns; the table itself only reads and changes pages.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from neardup.index.state.arrays import PatchedRows, RowBlocks, string_blocks
from neardup.index.state.merged_runs import merged_rows
from neardup.index.state.page_ref import NO_GROUP
from neardup.index.state.page_rows import COLUMNS

if TYPE_CHECKING:
    from neardup.index.state.pages import PageTable

# The files of a saved page table (`page_arrays`), beside the saved graph's.
PAGE_ARRAYS = (
    *(f"page_{name}" for name in COLUMNS),
    "page_sigs",
    "page_lens",
    "page_skeys",
    "page_sslots",
    "page_url_offsets",
    "page_url_bytes",
    "page_redirect_slots",
    "page_redirect_offsets",
    "page_redirect_bytes",
)


def page_arrays(
    table: PageTable, room: int, changed: np.ndarray
) -> Iterator[RowBlocks | PatchedRows]:
    """The table as the files `PageTable.from_saved` maps: every column and matrix by slot
    with `room` empty slots after the pages (the next batches' pages fill them without a
    copy), the page keys sorted, the URLs and the redirects' targets. Written a block at a
    time: a save holds no second copy of the table, and folds nothing in memory. The
    sketches and length vectors of a table opened from a save are that save's files with
    the rows of the `changed` slots (the slots written since, ascending) and the new ones
    put in, the rest copied file to file. Reads only."""
    urls = table.urls
    n = table.n
    for name in COLUMNS:
        col = getattr(table, name)
        pad = np.full(room, NO_GROUP if name == "group" else 0, col.dtype)
        yield RowBlocks({f"page_{name}": ((n + room,), col.dtype)}, [(col[:n],), (pad,)])
    source, source_rows = table.saved_from if table.saved_from is not None else (None, 0)
    for name, m in (("sigs", table.sigs), ("lens", table.lens)):
        yield PatchedRows(
            f"page_{name}",
            n + room,
            m.width,
            m.dtype,
            n,
            m.__getitem__,
            source,
            source_rows,
            changed,
        )
    # The page keys: the sorted ones with those of the slots added since (the level an
    # opening took in, and those added after it) merged in block by block (`merged_runs`),
    # not sorted whole; the URLs: the folded ones and the new.
    folded = urls.folded
    added = np.arange(folded, n, dtype=np.int64)
    keys = np.concatenate([urls.level_keys, np.asarray(table.key[added], np.int64)])
    slots = np.concatenate([urls.level_slots, added])
    order = np.argsort(keys, kind="stable")
    specs = {"page_skeys": np.int64, "page_sslots": np.int64}
    yield merged_rows(specs, [urls.skeys, urls.sslots], [keys[order], slots[order]])
    base = urls.base if urls.row is None else urls.base_array(np.arange(folded))
    chunks = base.chunks if isinstance(base, pa.ChunkedArray) else [base]
    level = urls.level_urls.cast(base.type) if urls.row is None else pa.array([], base.type)
    added_urls = pa.array(urls.new, base.type)
    yield string_blocks("page_url", pa.chunked_array([*chunks, level, added_urls]))
    targets = sorted(table.redirect.items())
    slots = np.array([s for s, _ in targets], np.int64)
    yield RowBlocks({"page_redirect_slots": ((slots.size,), np.int64)}, [(slots,)])
    yield string_blocks("page_redirect", pa.array([u for _, u in targets], pa.string()))
