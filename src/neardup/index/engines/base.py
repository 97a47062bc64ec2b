"""The index's engines: where a feed's pages are sketched, where a batch's reads of the saved
index run, and who writes a save's band tables.

Why one interface: the embedded engine and Spark do the same three things for the index,
and the index must not know which one it was given. The Spark path used to be five hooks
set on the index's objects around a batch, a table writer assigned to the index from the
feed, and `engine == "spark"` tests in the feed; it is now one object, chosen once by the
feed (`feed.engine_named`) and passed to what needs it: the feed's loop (`sketched`,
`lookups`) and the index's apply and close (`write_tables`, `BatchLookups`).

Both engines run the same functions: the Spark tasks call `prepare.prepare_batch`,
`saved_search.search_saved`, `saved_search.score_saved` and `band_save.write_table`, as
the embedded engine does here; `tests/service/test_engines.py` holds them to one answer
at this seam. The engines: `embedded.EmbeddedEngine`, `spark.SparkEngine`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from neardup.config import Settings
from neardup.index.service_index import ServiceIndex
from neardup.index.state.found import Found, PairsToScore
from neardup.index.state.lookups import HERE, BatchLookups
from neardup.index.state.prepare import PreparedBatch

# The saved index's entries for a batch's keys (by name: band, class, page, a `Found` a row
# of keys), and the band keys of the saved nodes among them, by slot.
Entries = tuple[dict[str, list[Found]], dict[int, np.ndarray]]


@dataclass(frozen=True)
class FeedInputs:
    """What a feed sketches: its files, `batch` pages a batch, with the index's settings
    and tier-2 dimensions; `skipped` and `inlinks` are filled as the files are read (the
    records left out by reason, the in-links of each URL)."""

    paths: list[str]
    store: Path
    settings: Settings
    dims: int
    batch: int
    links: bool
    workers: int | None
    skipped: Counter[str]
    inlinks: Counter[str]


class IndexEngine(Protocol):
    """Where the index's work that needs no lock runs."""

    def sketched(self, feed: FeedInputs) -> Iterator[PreparedBatch]:
        """The feed's batches read and sketched, in file order."""
        ...

    def lookups(self, index: ServiceIndex, prepared: PreparedBatch) -> BatchLookups:
        """What the batch will read of the saved index, found before it is applied."""
        ...

    def search(
        self,
        folder: Path,
        queries: dict[str, list[np.ndarray]],
        shape: tuple[int, int] | None = None,
    ) -> Entries:
        """The saved arrays' entries in the save `folder` for sorted keys
        (`ServiceIndex.saved_queries`), and with `shape` (bands, rows) the band keys of
        the saved nodes among the pages found."""
        ...

    def score(self, folder: Path, pairs: PairsToScore) -> np.ndarray:
        """The resemblance of pairs of sketches, the saved ones read in `folder`."""
        ...

    def write_tables(self, folder: Path, before: Path | None, tables: int) -> None:
        """A save's band tables written into `folder` (`band_save.filled`)."""
        ...


def found_elsewhere(
    engine: IndexEngine, index: ServiceIndex, prepared: PreparedBatch
) -> BatchLookups:
    """The batch's reads of the saved index searched by `engine` (two rounds: the page keys'
    entries first, since the other keys need the stored pages' slots), with its pairs of
    saved sketches compared there too; nothing when the index has no save yet."""
    queries = index.saved_queries(prepared)
    if queries is None:
        return HERE
    first, node_keys = engine.search(*queries, index.scan_graph.shape)
    pages = first["page"][0]
    rest = index.saved_queries(prepared, pages, node_keys)
    assert rest is not None  # the same save: nothing is saved between the two calls
    found, _ = engine.search(*rest)
    found["page"] = [pages.joined(found["page"][0])]
    return BatchLookups.of(found, node_keys, engine.score)
