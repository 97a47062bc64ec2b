"""The graph stores' changes taken in as a level of their own (`taken_entries`), against
plain dicts: a store with its base, the changes written before and its overlay answers as
one dict updated by the other two would, and writes the same changes and saves."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.index.state.graph_stores import CandidateCounts, ShingleClasses, VerifiedEdges
from neardup.index.state.overlay import Overlay
from neardup.index.state.taken_entries import TakenEntries, packed, union

KEYS = st.integers(0, 40)
RUNS = st.dictionaries(KEYS, st.lists(st.integers(0, 60), max_size=4, unique=True), max_size=12)


def _written(d: dict[int, list[int]], shuffled: bool = False) -> TakenEntries:
    """`d` as a changes folder holds it: packed (keys ascending), or in the dict's own order
    as an older neardup wrote it."""
    if not shuffled:
        keys, ptr, cols = packed(d)
        return TakenEntries(keys, ptr, cols)
    keys = np.array(list(d), np.int64)
    ptr = np.concatenate([[0], np.cumsum([len(v) for v in d.values()])]).astype(np.int64)
    flat = np.array([m for v in d.values() for m in v], np.int64)
    return TakenEntries(keys, ptr, [flat])


@settings(max_examples=60, deadline=None)
@given(RUNS, RUNS, st.booleans())
def test_a_level_answers_as_its_dict_and_joins_an_overlay_over_it(old, new, shuffled):
    taken = _written(old, shuffled)
    for key in range(45):
        got = taken.run(key)
        assert (got is None) == (key not in old)
        if got is not None:
            assert got[0].tolist() == old[key]  # a run keeps its members' order
    asked = np.arange(45, dtype=np.int64)
    assert taken.holds(asked).tolist() == [k in old for k in range(45)]
    keys, ptr, (flat,) = union(taken, *packed(new))
    want = {**old, **new}
    assert keys.tolist() == sorted(want)
    assert [flat[ptr[i] : ptr[i + 1]].tolist() for i in range(keys.size)] == [
        want[k] for k in sorted(want)
    ]
    without = np.array(sorted(new), np.int64)
    rk, rm = taken.rows(without)
    assert list(zip(rk.tolist(), rm.tolist(), strict=True)) == [
        (k, m) for k in sorted(old) if k not in new for m in old[k]
    ]


def _rows(blocks) -> list[tuple]:
    cols = [np.concatenate(c) if c else np.empty(0) for c in zip(*blocks.blocks, strict=False)]
    return list(zip(*(c.tolist() for c in cols), strict=True)) if cols else []


@settings(max_examples=60, deadline=None)
@given(RUNS, RUNS, RUNS)
def test_classes_read_base_then_changes_then_overlay(base, old, new):
    saved_rows = sorted((k, m) for k, v in base.items() for m in v)  # a save's: sorted
    fps = np.array([r[0] for r in saved_rows], np.int64)
    slots = np.array([r[1] for r in saved_rows], np.int64)
    classes = ShingleClasses(fps, slots)
    keys, ptr, cols = packed(old)
    classes.take(keys, ptr, cols[0])
    classes.over = Overlay((k, tuple(v)) for k, v in new.items())
    want = {**base, **old, **new}
    for fp in range(45):
        assert sorted(classes.members(fp)) == sorted(want.get(fp, []))
    # A batch's load takes an entry from the changes into the overlay, as a set.
    classes.load(list(old))
    assert all(sorted(classes.over[fp]) == sorted(want[fp]) for fp in old)
    ck, cp, cs = classes.changes()
    changed = {**old, **new}
    assert ck.tolist() == sorted(changed)
    assert [sorted(cs[cp[i] : cp[i + 1]].tolist()) for i in range(ck.size)] == [
        sorted(changed[k]) for k in sorted(changed)
    ]
    saved = _rows(classes.arrays())
    assert saved == sorted((k, m) for k, v in want.items() for m in v)


PAIRS = st.dictionaries(st.integers(0, 30), st.integers(0, 5), max_size=12)


@settings(max_examples=60, deadline=None)
@given(PAIRS, PAIRS, PAIRS)
def test_counts_read_base_then_changes_then_overlay(base, old, new):
    base = {k: c for k, c in base.items() if c > 0}  # a save holds live candidates only
    keys = np.array(sorted(base), np.int64)
    counts = CandidateCounts(keys, np.array([base[k] for k in sorted(base)], np.int16))
    counts.take(np.array(list(old), np.int64), np.array(list(old.values()), np.int64))
    counts.over = dict(new)
    below = {**base, **old}
    asked = np.arange(35, dtype=np.int64)
    assert counts.base_counts(asked).tolist() == [below.get(k, 0) for k in range(35)]
    want = {k: c for k, c in {**below, **new}.items() if c > 0}
    assert counts.live() == want
    changed = {**old, **new}
    ck, cc = counts.changes()
    assert dict(zip(ck.tolist(), cc.tolist(), strict=True)) == changed
    assert ck.tolist() == sorted(changed)
    assert _rows(counts.arrays()) == sorted(want.items())


EDGES = st.dictionaries(
    KEYS, st.dictionaries(st.integers(0, 40), st.sampled_from([0.5, 0.75, 1.0]), max_size=3)
)


@settings(max_examples=60, deadline=None)
@given(EDGES, EDGES, EDGES)
def test_edges_read_base_then_changes_then_overlay(base, old, new):
    rows = sorted((u, v, s) for u, nb in base.items() for v, s in nb.items())
    u = np.array([r[0] for r in rows], np.int64)
    v = np.array([r[1] for r in rows], np.int32)
    s = np.array([r[2] for r in rows], np.float32)
    n = 45
    ptr = np.searchsorted(u, np.arange(n + 1))
    edges = VerifiedEdges(u, v, s, ptr)
    keys, eptr, (ev, es) = packed(old, with_values=True)
    edges.take(keys, eptr, ev, es)
    edges.over = {k: dict(nb) for k, nb in new.items()}
    want = {**base, **old, **new}
    for node in range(n):
        assert edges.neighbours(node) == want.get(node, {})
    assert edges.count() == sum(len(nb) for nb in want.values()) // 2
    changed = {**old, **new}
    cu, cp, cv, cs = edges.changes()
    assert cu.tolist() == sorted(changed)
    got = {
        k: dict(zip(cv[cp[i] : cp[i + 1]].tolist(), cs[cp[i] : cp[i + 1]].tolist(), strict=True))
        for i, k in enumerate(cu.tolist())
    }
    assert got == changed
    blocks, _ = edges.arrays(n)
    assert _rows(blocks) == sorted((a, b, c) for a, nb in want.items() for b, c in nb.items())
