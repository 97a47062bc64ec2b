"""The saved index's sorted arrays searched where the files are (`search_saved`, what a
Spark executor runs) and the answers read by a lookup (`hits`), against a plain scan of the
arrays."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.index.files.saved_search import score_saved, search_saved
from neardup.index.files.saves import write_arrays
from neardup.index.state.arrays import PatchedRows
from neardup.index.state.found import Found, PairsToScore, hits


def _plain(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray) -> set[tuple[int, int]]:
    """(key, value) of every entry whose key is wanted, by looking at each entry."""
    want = set(wanted.tolist())
    return {(int(k), int(v)) for k, v in zip(keys, values, strict=True) if int(k) in want}


@pytest.mark.parametrize("seed", [0, 1])
def test_searched_entries_are_the_arrays_entries_for_the_keys(tmp_path, seed):
    rng = np.random.default_rng(seed)
    # Keys with repeats (a class of several pages, a band bucket of several nodes).
    fp = np.sort(rng.integers(-50, 50, 400)).astype(np.int64)
    slot = rng.permutation(400).astype(np.int64)
    bands = np.sort(rng.integers(0, 80, (3, 300)), axis=1).astype(np.int64)
    nodes = rng.integers(0, 1000, (3, 300)).astype(np.int32)
    write_arrays(
        tmp_path,
        "g",
        [("cls_fp", fp), ("cls_slot", slot), ("band_keys", bands), ("band_slots", nodes)],
    )
    asked_fp = np.unique(rng.integers(-60, 60, 40)).astype(np.int64)
    asked_bands = [np.unique(rng.integers(0, 90, 30)).astype(np.int64) for _ in range(3)]
    got = search_saved(tmp_path / "g", {"class": [asked_fp], "band": asked_bands})
    keys, values = got["class"][0]
    assert set(zip(keys.tolist(), values.tolist(), strict=True)) == _plain(fp, slot, asked_fp)
    for t in range(3):
        keys, values = got["band"][t]
        pairs = set(zip(keys.tolist(), values.tolist(), strict=True))
        assert pairs == _plain(bands[t], nodes[t], asked_bands[t])
    # A lookup reads the answers for the keys asked and searches the array for the rest.
    halves = asked_fp[::2], asked_fp[1::2]
    first = search_saved(tmp_path / "g", {"class": [halves[0]]})["class"][0]
    second = search_saved(tmp_path / "g", {"class": [halves[1]]})["class"][0]
    found = Found.of(halves[0], *first)
    wanted = np.unique(np.concatenate([asked_fp, [99, -99]])).astype(np.int64)
    for answer, misses in ((found, wanted.size - halves[0].size), (None, wanted.size)):
        at, vals, searched = hits(answer, wanted, fp, slot)
        assert searched == misses
        pairs = {(int(wanted[q]), int(v)) for q, v in zip(at, vals, strict=True)}
        assert pairs == _plain(fp, slot, wanted)
    both = found.joined(Found.of(halves[1], *second))
    at, vals, searched = hits(both, asked_fp, fp, slot)
    assert searched == 0
    pairs = {(int(asked_fp[q]), int(v)) for q, v in zip(at, vals, strict=True)}
    assert pairs == _plain(fp, slot, asked_fp)


@pytest.mark.parametrize(("seed", "parts", "part_rows"), [(0, 1, 0), (1, 3, 7), (2, 7, 64)])
def test_pairs_scored_where_the_sketches_are_saved(tmp_path, seed, parts, part_rows):
    """`score_saved` (an executor's work) over the pairs cut into runs: each pair's share
    of equal values, counted here position by position, with the changed sketches that go
    with the pairs taking the place of the saved rows; the saved sketches in one file (an
    older save) or in partitions of `part_rows` rows."""
    rng = np.random.default_rng(seed)
    saved = rng.integers(0, 4, (60, 16)).astype(np.uint32)  # few values: many equal
    if part_rows:
        rows = PatchedRows(
            "page_sigs", 60, 16, np.uint32, 60, lambda s: saved[s], part_rows=part_rows
        )
        write_arrays(tmp_path, "g", [rows])
    else:
        write_arrays(tmp_path, "g", [("page_sigs", saved)])
    now = saved.copy()
    fresh = np.sort(rng.choice(60, 15, replace=False)).astype(np.int64)
    now[fresh] = rng.integers(0, 4, (15, 16)).astype(np.uint32)
    a = rng.integers(0, 60, 90).astype(np.int64)
    b = rng.integers(0, 60, 90).astype(np.int64)
    pairs = PairsToScore(a, b, fresh, now[fresh])
    got = np.concatenate([score_saved(tmp_path / "g", run) for run in pairs.cut(parts)])
    want = [
        sum(int(x == y) for x, y in zip(now[i], now[j], strict=True)) / 16
        for i, j in zip(a, b, strict=True)
    ]
    assert got.dtype == np.float64 and got.tolist() == want
    assert [run.a.size for run in pairs.cut(parts)] == np.diff(
        np.linspace(0, 90, parts + 1).astype(int)
    ).tolist()


def test_saved_nodes_keys_come_with_the_page_keys_found(tmp_path):
    """With the band index's shape, a search of page keys also gives, for the pages found
    that the saved graph holds as nodes, the band keys of their saved sketches: each
    checked against `lsh_keys` of that row, and no key for a page that is no node."""
    from neardup.index.files.saved_search import NODE_KEYS
    from neardup.pipeline.steps.near_pairs import lsh_keys

    rng = np.random.default_rng(5)
    n = 50
    sigs = rng.integers(0, 2**32, (n, 32), dtype=np.uint64).astype(np.uint32)
    node = rng.random(n + 10) < 0.5  # saved with room after the pages
    keys = rng.integers(-(2**40), 2**40, n).astype(np.int64)
    order = np.argsort(keys)
    sketches = PatchedRows("page_sigs", n, 32, np.uint32, n, lambda s: sigs[s], part_rows=9)
    write_arrays(
        tmp_path,
        "g",
        [sketches, ("node", node), ("page_skeys", keys[order]), ("page_sslots", order)],
    )
    assert len(list((tmp_path / "g").glob("page_sigs.p*.npy"))) == 6
    asked = np.sort(keys[rng.choice(n, 20, replace=False)])
    got = search_saved(tmp_path / "g", {"page": [asked]}, (4, 8))
    slots, found = got[NODE_KEYS][0]
    found_slots = np.sort(order[np.isin(keys[order], asked)])
    assert slots.tolist() == [s for s in found_slots.tolist() if node[s]]
    assert np.array_equal(found, lsh_keys(sigs[slots], None, 4, 8))
