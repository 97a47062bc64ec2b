"""Saved sorted arrays read by blocks (`store/file_vectors.py`) against numpy's own search
and indexing of the same values in memory."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.kernels.lsh import key_hits
from neardup.store import file_vectors
from neardup.store.file_vectors import FileVector, SortedVector


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of 8 values, gaps of 1 block read, chunks of 3 blocks: a key's run crosses
    blocks, runs and chunks."""
    monkeypatch.setattr(file_vectors, "STRIDE", 8)
    monkeypatch.setattr(file_vectors, "_GAP_BLOCKS", 1)
    monkeypatch.setattr(file_vectors, "_CHUNK_BLOCKS", 3)


values_st = st.lists(st.integers(-40, 40), max_size=300)
queries_st = st.lists(st.integers(-45, 45), max_size=60)


@settings(max_examples=60, deadline=None)
@given(values=values_st, queries=queries_st, row=st.integers(0, 2))
def test_the_search_is_numpys(tmp_path_factory, values, queries, row) -> None:
    """Each side of `np.searchsorted`, `bounds` and `key_hits` over one row of a 2-D file
    (a band table) equal numpy's over the row in memory, whatever the order of the
    queries and however the runs of equal keys cross blocks."""
    keys = np.sort(np.array(values, np.int64))
    matrix = np.stack([keys - 1, keys, keys + 1])
    path = tmp_path_factory.mktemp("v") / "band_keys.npy"
    np.save(path, matrix)
    rows = SortedVector.of(path)
    assert rows.shape == matrix.shape
    vec, mem = rows[row], matrix[row]
    q = np.array(queries, np.int64)
    for side in ("left", "right"):
        assert np.array_equal(np.searchsorted(vec, q, side), np.searchsorted(mem, q, side))
        for one in q[:5].tolist():
            assert np.searchsorted(vec, one, side) == np.searchsorted(mem, one, side)
    ids = np.arange(mem.size, dtype=np.int32) * 3
    np.save(path.with_name("ids.npy"), ids)
    got = key_hits(vec, FileVector.of(path.with_name("ids.npy")), np.unique(q))
    want = key_hits(mem, ids, np.unique(q))
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(st.integers(0, 10**6), max_size=200),
    picks=st.lists(st.integers(-250, 250), max_size=80),
    lo=st.integers(-210, 210),
    hi=st.integers(-210, 210),
)
def test_reads_are_numpys(tmp_path_factory, values, picks, lo, hi) -> None:
    """Positions (any order, repeats, negative), slices and single values read by blocks
    equal numpy's indexing; a position outside the vector is an IndexError, as numpy's."""
    mem = np.array(values, np.int64)
    path = tmp_path_factory.mktemp("v") / "a.npy"
    np.save(path, mem)
    vec = FileVector.of(path)
    assert len(vec) == mem.size
    assert np.array_equal(vec[lo:hi], mem[lo:hi])
    for step in (2, -1, -3):
        assert np.array_equal(vec[lo:hi:step], mem[lo:hi:step])
    p = np.array(picks, np.int64)
    inside = (p >= -mem.size) & (p < mem.size)
    assert np.array_equal(vec[p[inside]], mem[p[inside]])
    assert np.array_equal(vec[p[inside].reshape(-1, 1)], mem[p[inside].reshape(-1, 1)])
    if (~inside).any():
        with pytest.raises(IndexError):
            vec[p]
    for i in p[inside][:5].tolist():
        assert vec[i] == mem[i]


def test_a_vector_is_never_read_whole_by_accident(tmp_path) -> None:
    """numpy's whole-array functions refuse a vector read by blocks (it would be read whole
    into memory): a caller reads it in blocks, and the blocks are every value once."""
    mem = np.arange(100, dtype=np.int64)
    np.save(tmp_path / "a.npy", mem)
    vec = FileVector.of(tmp_path / "a.npy")
    with pytest.raises(TypeError, match="blocks"):
        np.isin(vec, [1, 2])
    assert np.array_equal(np.concatenate([b for _, b in vec.blocks(7)]), mem)
    assert [lo for lo, _ in vec.blocks(40)] == [0, 40, 80]


def test_a_saved_sparse_index_is_the_one_read_from_the_file(tmp_path) -> None:
    """The sparse index a save writes beside a sorted file (each row's, for a matrix) is
    the one a search reads from the file itself, and an opening takes it instead of
    reading the file; a file saved with another stride has none for this one."""
    keys = np.sort(np.random.default_rng(1).integers(0, 1000, (3, 61)), axis=1)
    path = tmp_path / "band_keys.npy"
    np.save(path, keys)
    read = [row.sparse.tolist() for row in SortedVector.of(path)]
    assert read == [row[::8].tolist() for row in keys]  # (the fixture's stride)
    file_vectors.save_sparse(path)
    opened = SortedVector.of(path)
    assert [row._sparse.tolist() for row in opened] == read  # taken as saved
    q = np.arange(-5, 1005, 7)
    assert np.array_equal(np.searchsorted(opened[2], q), np.searchsorted(keys[2], q))
    file_vectors.STRIDE = 16  # (put back by the fixture)
    assert all(row._sparse is None for row in SortedVector.of(path))
