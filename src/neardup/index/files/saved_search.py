"""The index's saved arrays read elsewhere (issue 27: Spark's executors search the saved
index for a batch and compare its saved sketches, the process that applies it reads their
answer).

Three lookups of a batch go to arrays that the save writes sorted by key and that grow with
the index: the band index (`band_keys` with each entry's node, a row a table), the classes
(`cls_fp` with each entry's page) and the page keys (`page_skeys` with each key's slot).
A batch's keys for each are known before it is applied (`ServiceIndex.saved_queries`), so
they can be searched where the files are, a range of keys a task, and the answers handed to
the lookups (`Found`). A lookup answers the keys it was handed from them and searches the
saved array itself for any other key (counted), so a guess of the keys that falls short
costs time, never the answer.

The sketches a batch compares (its candidates, each group's members against its winner)
are the largest part of a page and are read at random: `PairsToScore` asks where the saved
sketches are for the resemblance of each pair, handing over the sketches that changed
since the save, so the process that applies a batch reads none of the saved ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from neardup.index.files.saves import read_arrays
from neardup.index.state.arrays import parted_rows
from neardup.index.state.found import PairsToScore, node_keys
from neardup.kernels.lsh import key_hits
from neardup.kernels.minhash import estimate_resemblance
from neardup.kernels.sorting import sorted_distinct

# What is searched: a name -> the saved files of its sorted keys and of their values.
SEARCHED = {
    "band": ("band_keys", "band_slots"),
    "class": ("cls_fp", "cls_slot"),
    "page": ("page_skeys", "page_sslots"),
}


def search_saved(
    folder: Path, queries: dict[str, list[np.ndarray]], shape: tuple[int, int] | None = None
) -> dict[str, list[tuple[np.ndarray, np.ndarray]]]:
    """Where the files are (an executor): the entries of each saved array `SEARCHED` names
    for the keys `queries[name][row]` (sorted) of each of its rows (the band index has a row
    a table, the others one): (keys, values) a row. Reads only the blocks the searches land
    on (`store/file_vectors.py`). With `shape` (bands, rows), also `NODE_KEYS`: the pages found
    by their keys that the saved graph holds as nodes, with the band keys of their saved
    sketches (the keys the saved band index files them under), (slots, keys)."""
    out: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
    for name, rows in queries.items():
        key_file, value_file = SEARCHED[name]
        got_files = read_arrays(folder.parent, folder.name, (key_file, value_file))
        keys, values = got_files[key_file], got_files[value_file]  # read by blocks
        if not isinstance(keys, list):  # one row (a band index has a row a table)
            keys, values = [keys], [values]
        got = []
        for row, q in enumerate(rows):
            at, found = key_hits(keys[row], values[row], q)
            got.append((q[at], np.asarray(found)))
        out[name] = got
    if shape is not None and "page" in out:
        slots = np.concatenate([values for _, values in out["page"]]).astype(np.int64)
        out[NODE_KEYS] = [node_keys_in_files(folder, sorted_distinct(slots), *shape)]
    return out


def score_saved(folder: Path, pairs: PairsToScore) -> np.ndarray:
    """Where the files are (an executor): the estimated resemblance of each pair
    (`estimate_resemblance`, float64), a sketch taken from `pairs.fresh_sigs` where its slot
    is fresh, else from the save's sketches (only the rows asked are read)."""
    saved = read_arrays(folder.parent, folder.name, ("page_sigs",))["page_sigs"]

    def rows(slots: np.ndarray) -> np.ndarray:
        out = np.empty((slots.size, saved[0].shape[1]), saved[0].dtype)
        at = np.searchsorted(pairs.fresh, slots)
        fresh = at < pairs.fresh.size
        fresh[fresh] = pairs.fresh[at[fresh]] == slots[fresh]
        out[fresh] = pairs.fresh_sigs[at[fresh]]
        stale = np.flatnonzero(~fresh)
        order = np.argsort(slots[stale], kind="stable")  # the file read in slot order
        out[stale[order]] = parted_rows(saved, slots[stale][order])
        return out

    got = estimate_resemblance(rows(pairs.a), rows(pairs.b))
    return np.asarray(got, np.float64).reshape(-1)


NODE_KEYS = "node_keys"  # what `search_saved` adds with a shape: saved nodes' band keys


def node_keys_in_files(
    folder: Path, slots: np.ndarray, bands: int, rows: int
) -> tuple[np.ndarray, np.ndarray]:
    """`node_keys` read where the files are: the saved graph's `node` column and the saved
    sketches."""
    node = np.load(folder / "node.npy", mmap_mode="r")
    sigs = read_arrays(folder.parent, folder.name, ("page_sigs",))["page_sigs"]
    return node_keys(node, lambda nodes: parted_rows(sigs, nodes), slots, bands, rows)
