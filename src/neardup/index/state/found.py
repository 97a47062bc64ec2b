"""The entries of the index's saved sorted arrays for a batch's keys, found before the batch,
and the pairs of sketches it asks to be compared: what the state reads instead of searching
its mapped arrays itself (`lookups.BatchLookups`).

Kept apart from the search of the files (`files/saved_search.py`, which the engines run
where the files are) so that the state, which only reads these answers, imports no file
reader.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from neardup.kernels.lsh import key_hits
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.near_pairs import lsh_keys


@dataclass(frozen=True)
class Found:
    """The entries of a saved sorted array for the keys `asked` (sorted, distinct),
    searched elsewhere: their `keys`, sorted, and the value of each."""

    asked: np.ndarray
    keys: np.ndarray
    values: np.ndarray

    @classmethod
    def of(cls, asked: np.ndarray, keys: np.ndarray, values: np.ndarray) -> Found:
        order = np.argsort(keys, kind="stable")
        return cls(sorted_distinct(asked), keys[order], values[order])

    def joined(self, other: Found) -> Found:
        """The entries of both searches (of one array, for different keys)."""
        return Found.of(
            np.concatenate([self.asked, other.asked]),
            np.concatenate([self.keys, other.keys]),
            np.concatenate([self.values, other.values]),
        )


def hits(
    found: Found | None, wanted: np.ndarray, keys: np.ndarray, values: np.ndarray
) -> tuple[np.ndarray, np.ndarray, int]:
    """`key_hits` of the distinct keys `wanted` over a saved sorted array (`keys`, their
    `values`): (query position, value) of every entry, answered from `found` for the keys
    it was asked, the others searched in the array; and how many keys were searched."""
    if found is None:
        qpos, got = key_hits(keys, values, wanted)
        return qpos, got, int(wanted.size)
    inside = np.isin(wanted, found.asked, assume_unique=True)
    if inside.all():
        qpos, got = key_hits(found.keys, found.values, wanted)
        return qpos, got.astype(values.dtype), 0
    qa, va = key_hits(found.keys, found.values, wanted[inside])
    qb, vb = key_hits(keys, values, wanted[~inside])
    where_in, where_out = np.flatnonzero(inside), np.flatnonzero(~inside)
    return (
        np.concatenate([where_in[qa], where_out[qb]]),
        np.concatenate([va, vb]).astype(values.dtype),
        int(where_out.size),
    )


@dataclass(frozen=True)
class PairsToScore:
    """Pairs of pages whose sketches are compared (verification's candidates, a group's
    members against its winner), asked of where the saved sketches are: the slots of each
    pair (`a[i]`, `b[i]`), and the sketches of the slots whose row is not the save's
    (`fresh`, sorted; written since the save or by the batch): those go with the pairs."""

    a: np.ndarray
    b: np.ndarray
    fresh: np.ndarray
    fresh_sigs: np.ndarray

    def cut(self, parts: int) -> list[PairsToScore]:
        """The pairs in `parts` runs, each with the fresh sketches its pairs need."""
        bounds = np.linspace(0, self.a.size, parts + 1).astype(np.int64)
        out = []
        for lo, hi in pairwise(bounds.tolist()):
            a, b = self.a[lo:hi], self.b[lo:hi]
            need = np.isin(self.fresh, np.concatenate([a, b]))
            out.append(PairsToScore(a, b, self.fresh[need], self.fresh_sigs[need]))
        return out


def node_keys(
    node: np.ndarray,
    sketches: Callable[[np.ndarray], np.ndarray],
    slots: np.ndarray,
    bands: int,
    rows: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Of `slots`, those `node` (a saved graph's column) marks as nodes, and the
    band keys of their sketches as `sketches` reads them (`lsh_keys`): with the saved
    sketches, the keys the saved band index files them under."""
    inside = slots[slots < node.shape[0]]
    nodes = inside[np.asarray(node[inside], bool)]
    if not nodes.size:
        return nodes, np.empty((0, bands), np.int64)
    return nodes, lsh_keys(sketches(nodes), None, bands, rows)
