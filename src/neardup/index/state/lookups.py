"""What a batch reads of the saved index, when it was found elsewhere: one frozen record
passed down to the code that reads (`batch.compute_batch`, `ScanGraph.update`,
`PageTable.lookup` and `resemblance`, `BandBuckets.members`).

Why: a batch looks up its pages, their classes and their buckets in the index's saved sorted
arrays, and compares the saved sketches of its candidate pairs. The embedded engine does
that here, reading the mapped files as it goes (`BatchLookups()`, nothing found
elsewhere); the Spark engine does it on the executors, where the files are, before the
batch (`engines.IndexEngine.lookups`). The answers used to be five attributes of the
index's objects set before the batch and cleared after it; as one record passed down, a
reader sees what a batch was given, and nothing outlives it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neardup.index.state.found import Found, PairsToScore

# (the save's folder, the pairs of sketches to compare) -> their resemblance
ScorePairs = Callable[[Path, PairsToScore], np.ndarray]


@dataclass(frozen=True)
class BatchLookups:
    """The saved arrays' entries for a batch's keys, searched elsewhere, and where its pairs
    of saved sketches are compared. A key or pair that is not here is read here: a guess
    that falls short costs time, never the answer."""

    band: list[Found] | None = None  # the band index's entries, a `Found` a table
    classes: Found | None = None  # the classes' entries for the batch's fingerprints
    pages: Found | None = None  # the page keys' entries
    node_keys: dict[int, np.ndarray] | None = None  # band keys of saved nodes, by slot
    score: ScorePairs | None = None  # None: the saved sketches compared here

    @classmethod
    def of(
        cls,
        found: dict[str, list[Found]] | None,
        node_keys: dict[int, np.ndarray] | None = None,
        score: ScorePairs | None = None,
    ) -> BatchLookups:
        """From the answers of `saved_search.search_saved` (by name: band, class, page)."""
        if found is None:
            return cls(node_keys=node_keys, score=score)
        return cls(found["band"], found["class"][0], found["page"][0], node_keys, score)


HERE = BatchLookups()  # everything read here, from the mapped files (the embedded engine)
