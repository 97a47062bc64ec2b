"""The service's band index (mapped base + in-memory delta) against a plain dict of sets,
through leaves, re-entries and folds into a new base (what saving the graph does: each
table written in place from the save before and the changes, `band_save.py`, checked
against a stable sort of both levels)."""

from __future__ import annotations

import atexit
import itertools
import os
import shutil
import tempfile
from pathlib import Path
from unittest import mock

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.index.files import band_save
from neardup.index.files.saves import read_arrays, write_arrays
from neardup.index.opening import read_graph
from neardup.index.state.band_buckets import BandBuckets, NodeKeys
from neardup.index.state.found import Found
from neardup.store.file_vectors import whole

TABLES = 3
_SAVES = Path(tempfile.mkdtemp(prefix="neardup-bands-"))  # the tests' saves, one a fold
atexit.register(shutil.rmtree, _SAVES, True)
_NAMES = itertools.count()


def reference_members(ref: dict[int, np.ndarray], keys: list[np.ndarray], at_least: int):
    out: dict[tuple[int, int], set[int]] = {}
    for slot, ks in ref.items():
        for t in range(TABLES):
            if ks[t] in set(keys[t].tolist()):
                out.setdefault((t, int(ks[t])), set()).add(slot)
    return {b: m for b, m in out.items() if len(m) >= at_least}


def folded(bb: BandBuckets, cap: int) -> BandBuckets:
    """The index saved and opened again: both levels folded into a new base, the tables
    written from the save before (the folder the base came from) and the changes, then
    mapped; checked against both levels sorted together (old entries first at equal keys)."""
    before: Path | None = getattr(bb, "saved_in", None)
    name = f"g{next(_NAMES)}"
    write_arrays(_SAVES, name, [bb.folded(before, band_save.band_writer())])
    got = read_arrays(_SAVES, name, band_save.BAND_FILES)
    keys, slots = got["band_keys"], got["band_slots"]
    assert keys.shape == slots.shape == (TABLES, bb.entries())
    assert not (_SAVES / name / band_save.DELTA).exists()  # removed before the rename
    for t in range(TABLES):
        bk, bs = whole(bb.base_keys[t]), whole(bb.base_slots[t])
        live = ~bb.base_dead[bs]
        dk, ds = bb._delta(t)  # the delta, with the changes a save kept (`saved_again`)
        k = np.concatenate([bk[live], dk])
        order = np.argsort(k, kind="stable")
        assert whole(keys[t]).tolist() == k[order].tolist()
        assert whole(slots[t]).tolist() == np.concatenate([bs[live], ds])[order].tolist()
    out = BandBuckets(TABLES, keys, slots, cap)
    out.saved_in = _SAVES / name  # type: ignore[attr-defined]
    return out


def saved_again(bb: BandBuckets, cap: int) -> BandBuckets:
    """The index saved as a save saves it (`saved`: the base's files kept and the changes
    written beside them while those are few, else folded) and opened again as an opening
    reads it (`read_graph`, then `take_changes` of the changes kept)."""
    before: Path | None = getattr(bb, "saved_in", None)
    name = f"g{next(_NAMES)}"
    kept = bb.keeps_base(before)
    write_arrays(_SAVES, name, bb.saved(before, band_save.band_writer()))
    got = read_graph(_SAVES, name, band_save.BAND_FILES)
    assert (got["band_run"] is not None) == kept
    if kept:  # the same files, not a copy
        assert before is not None
        for file in ("band_keys.npy", "band_slots.npy"):
            assert os.path.samefile(before / file, _SAVES / name / file)
    out = BandBuckets(TABLES, got["band_keys"], got["band_slots"], cap)
    if kept:
        out.take_changes(got["band_run"])
    out.saved_in = _SAVES / name  # type: ignore[attr-defined]
    return out


def keys_of(bb: BandBuckets, slot: int) -> list[int]:
    """A node's keys: kept in the delta, or found in the base's own entries."""
    got = bb.keys_of(slot)
    return (bb.base_keys_of(np.array([slot]))[slot] if got is None else got).tolist()


def check(bb: BandBuckets, ref: dict[int, np.ndarray]) -> None:
    wanted = [np.arange(7, dtype=np.int64) for _ in range(TABLES)]
    for at_least in (1, 2):
        got = {b: set(m) for b, m in bb.members(wanted, at_least).items()}
        assert got == reference_members(ref, wanted, at_least)
    # The base's entries searched elsewhere (`preloaded`, what Spark's executors do), for
    # every key asked or only some (the others searched in the base here): the same.
    for asked in ([np.arange(7, dtype=np.int64)] * TABLES, [np.array([1, 4, 6])] * TABLES):
        found = []
        for t in range(TABLES):
            at = np.flatnonzero(np.isin(whole(bb.base_keys[t]), asked[t]))[::-1]  # any order
            found.append(Found.of(asked[t], bb.base_keys[t][at], bb.base_slots[t][at]))
        searched = bb.base_searches
        for at_least in (1, 2):
            got = {b: set(m) for b, m in bb.members(wanted, at_least, found).items()}
            assert got == reference_members(ref, wanted, at_least)
        missed = sum(int(np.isin(wanted[t], asked[t], invert=True).sum()) for t in range(TABLES))
        assert bb.base_searches - searched == 2 * missed
    for slot, ks in ref.items():
        assert keys_of(bb, slot) == ks.tolist()


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from([1, 2, 5, 1 << 22]),
    st.lists(
        st.tuples(
            st.booleans(),
            st.integers(0, 40),
            st.lists(st.integers(0, 6), min_size=3, max_size=3),
            st.sampled_from(["", "fold", "save"]),
        ),
        min_size=1,
        max_size=120,
    ),
)
def test_members_equal_a_dict_of_sets(block, ops):
    """Adds (with few distinct keys, so buckets fill), leaves and re-entries of one slot with
    other keys, in any order, with folds into a new base between them (the old rows read a
    block of `block` entries at a time) or saves (the base kept while the changes are few)."""
    with mock.patch.object(band_save, "_BLOCK", block):
        _members_equal_a_dict_of_sets(ops)


def _members_equal_a_dict_of_sets(ops):
    bb = BandBuckets(TABLES)
    ref: dict[int, np.ndarray] = {}
    for add, slot, keys, save in ops:
        if slot in ref:
            bb.remove([slot])
            del ref[slot]
        if add:
            ks = np.array([keys], dtype=np.int64)
            bb.add([slot], ks)
            ref[slot] = ks[0]
        if save:
            bb = folded(bb, 41) if save == "fold" else saved_again(bb, 41)
    check(bb, ref)
    check(folded(bb, 41), ref)
    check(saved_again(bb, 41), ref)


def test_large_batches_with_leaves_and_folds():
    rng = np.random.default_rng(1)
    bb = BandBuckets(TABLES)
    ref: dict[int, np.ndarray] = {}
    for step in range(6):
        slots = list(range(step * 30_000, (step + 1) * 30_000))
        keys = rng.integers(0, 50_000, size=(len(slots), TABLES), dtype=np.int64)
        bb.add(slots, keys)
        ref.update(zip(slots, keys, strict=True))
        gone = list(ref)[::3]
        bb.remove(gone)
        for s in gone:
            del ref[s]
        if step % 2:
            bb = folded(bb, 180_000)
            assert bb.base_keys.shape == (TABLES, len(ref))  # dead entries dropped
    sample = rng.choice(len(ref), 200, replace=False)
    slots = list(ref)
    wanted = [np.unique([ref[slots[i]][t] for i in sample]) for t in range(TABLES)]
    got = {b: set(m) for b, m in bb.members(wanted, 1).items()}
    assert got == reference_members(ref, wanted, 1)


def test_saves_keep_the_base_while_the_changes_are_few_then_fold():
    """A base of 6,000 nodes, then batches that add nodes, take base nodes and nodes of the
    kept changes out and put some back with other keys, each saved and opened again: the
    first saves keep the base's files and write the changes beside them (so those grow
    from save to save), until they pass half the base and a save folds them in. Every
    bucket and every node's keys equal a plain dict's after each opening."""
    rng = np.random.default_rng(3)
    bb = BandBuckets(TABLES)
    slots = list(range(6000))
    keys = rng.integers(0, 9000, size=(len(slots), TABLES), dtype=np.int64)
    bb.add(slots, keys)
    ref = dict(zip(slots, keys, strict=True))
    bb = folded(bb, 6000)
    kinds, nxt = [], 6000
    for _ in range(8):
        new = list(range(nxt, nxt + 500))
        nxt += 500
        gone = rng.choice(list(ref), 400, replace=False).tolist()
        back = gone[:100]  # out, then in again with other keys
        bb.remove(gone)
        for s in gone:
            del ref[s]
        add = new + back
        ks = rng.integers(0, 9000, size=(len(add), TABLES), dtype=np.int64)
        bb.add(add, ks)
        ref.update(zip(add, ks, strict=True))
        kinds.append(bb.keeps_base(bb.saved_in))  # type: ignore[attr-defined]
        bb = saved_again(bb, nxt)
        wanted = [np.unique(np.stack(list(ref.values()))[:, t]) for t in range(TABLES)]
        got = {b: set(m) for b, m in bb.members(wanted, 1).items()}
        assert got == reference_members(ref, wanted, 1)
        for s in rng.choice(list(ref), 300, replace=False).tolist():
            assert keys_of(bb, s) == ref[s].tolist()
    assert kinds[:2] == [True, True] and False in kinds  # kept, then folded
    assert kinds[kinds.index(False) + 1] is True  # kept again over the new base


def test_churn_of_the_same_slots_stays_exact():
    """The same 2,000 pages replaced again and again (a service re-crawling its pages): the
    base entries of a slot that left never count again, folded or not."""
    rng = np.random.default_rng(2)
    bb = BandBuckets(TABLES)
    ref: dict[int, np.ndarray] = {}
    slots = list(range(2000))
    for i in range(40):
        keys = rng.integers(0, 3000, size=(len(slots), TABLES), dtype=np.int64)
        bb.remove([s for s in slots if s in ref])
        bb.add(slots, keys)
        ref = dict(zip(slots, keys, strict=True))
        if i % 7 == 3:
            bb = folded(bb, 2000)
    wanted = [np.unique(np.stack(list(ref.values()))[:, t]) for t in range(TABLES)]
    got = {b: set(m) for b, m in bb.members(wanted, 1).items()}
    assert got == reference_members(ref, wanted, 1)
    for s, ks in ref.items():
        assert keys_of(bb, s) == ks.tolist()


def test_a_table_writer_refuses_a_save_that_does_not_match(tmp_path):
    """A table written from a save before that holds another number of entries than the
    base (the wrong folder) is an error, not a band index of wrong rows. A base with no
    save behind it (built in memory) is written from memory: the same tables."""
    bb = BandBuckets(TABLES)
    bb.add([0, 1], np.array([[1, 2, 3], [4, 5, 6]], np.int64))
    first = folded(bb, 4)
    first.add([2], np.array([[7, 8, 9]], np.int64))
    other = folded(BandBuckets(TABLES), 4)  # a save of no entries
    with pytest.raises(ValueError, match="entries a table, not 2"):
        write_arrays(tmp_path, "g", [first.folded(other.saved_in, band_save.band_writer())])
    assert not (tmp_path / "g").exists()
    right = folded(first, 4)
    write_arrays(tmp_path, "m", [first.folded(None, band_save.band_writer())])
    got = read_arrays(tmp_path, "m", band_save.BAND_FILES)
    assert whole(got["band_keys"]).tolist() == whole(right.base_keys).tolist()
    assert whole(got["band_slots"]).tolist() == whole(right.base_slots).tolist()


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 300), st.data())
def test_the_keys_by_node_read_from_a_changes_file_are_its_rows(nodes, data):
    """`TakenRun` reads the keys of nodes at any positions from the flat vector a changes
    folder's `node_keys` is read as: a span of rows at once, or cell by cell where the
    positions are scattered; the same rows as the matrix written."""
    from neardup.index.state.band_buckets import TakenRun
    from neardup.store.file_vectors import FileVector

    rng = np.random.default_rng(nodes)
    keys = rng.integers(-(2**62), 2**62, size=(nodes, TABLES), dtype=np.int64)
    path = _SAVES / f"node-keys-{next(_NAMES)}.npy"
    np.save(path, keys)
    run = TakenRun(TABLES, nodes=np.arange(nodes, dtype=np.int64) * 2, node_keys=FileVector(path))
    at = np.array(data.draw(st.lists(st.integers(0, nodes - 1), min_size=0, max_size=12)), np.int64)
    if data.draw(st.booleans()):
        at = np.sort(at)
    assert np.array_equal(run._keys_at(at), keys[at].reshape(at.size, TABLES))
    for i in at.tolist():
        assert np.array_equal(run.get(2 * i), keys[i])


@settings(deadline=None, max_examples=80)
@given(
    st.lists(st.tuples(st.booleans(), st.integers(0, 900)), min_size=1, max_size=12),
    st.integers(0, 2**31),
)
def test_the_delta_nodes_keys_answer_as_a_dict(steps, seed):
    """`NodeKeys` (a matrix of key rows and a dict slot -> row) against a dict of rows:
    nodes put in batches (some again, with new keys), nodes popped, the matrix grown and
    compacted past its first size; `live` with `rows_at` lists each node once with its keys."""
    rng = np.random.default_rng(seed)
    got, want = NodeKeys(3), {}
    for put, count in steps:
        slots = rng.choice(3000, count, replace=False).tolist()
        if put:
            keys = rng.integers(-(2**62), 2**62, (len(slots), 3), dtype=np.int64)
            got.put(slots, keys)
            want.update({s: k.copy() for s, k in zip(slots, keys, strict=True)})
        else:
            for s in slots:
                a, b = got.pop(s), want.pop(s, None)
                assert (a is None and b is None) or a.tolist() == b.tolist()
        assert len(got) == len(want)
        for s in slots[:50]:
            assert (s in got) == (s in want)
            a = got.get(s)
            assert (a is None) == (s not in want) and (a is None or a.tolist() == want[s].tolist())
    nodes, rows = got.live()
    assert sorted(nodes.tolist()) == sorted(want) and len(set(nodes.tolist())) == nodes.size
    keys = got.rows_at(rows)
    assert {s: k.tolist() for s, k in zip(nodes.tolist(), keys, strict=True)} == {
        s: k.tolist() for s, k in want.items()
    }
