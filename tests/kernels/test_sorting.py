"""Stable sorts of int64 keys (`kernels/sorting.py`) against numpy's own stable sorts."""

from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from neardup.kernels import sorting
from neardup.kernels.sorting import lexsort_pair, sorted_distinct, sorted_stably, stable_argsort

# Few distinct values make long runs of ties (past the insertion sort's length); the int64
# extremes check that nothing overflows.
KEYS = hnp.arrays(
    np.int64,
    st.integers(0, 300),
    elements=st.sampled_from([np.iinfo(np.int64).min, -7, 0, 3, 2**40, np.iinfo(np.int64).max]),
)


@settings(max_examples=300, deadline=None)
@given(KEYS)
def test_stable_argsort_is_numpys_stable_sort(keys):
    assert np.array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 300).flatmap(
        lambda n: st.tuples(*(hnp.arrays(np.int64, n, elements=st.integers(-3, 3)),) * 2)
    )
)
def test_lexsort_pair_is_numpys_lexsort(pair):
    minor, major = pair
    assert np.array_equal(lexsort_pair(minor, major), np.lexsort((minor, major)))


@settings(max_examples=300, deadline=None)
@given(KEYS, st.integers(1, 64))
def test_the_partitioned_sort_is_numpys_stable_sort(keys, size):
    """Above a size, keys are spread by their top bits and each partition sorted alone; the
    limits made small here so that every example takes that way."""
    with _partitioned_from(0, size):
        positions, ordered = sorted_stably(keys)
    expected = np.argsort(keys, kind="stable")
    assert np.array_equal(positions, expected)
    assert np.array_equal(ordered, keys[expected])


def test_three_million_keys_take_the_partitioned_sort():
    rng = np.random.default_rng(6)
    keys = rng.integers(-(2**63), 2**63 - 1, 3_000_000, dtype=np.int64)
    keys[::1000] = 42
    keys[1::977] = np.iinfo(np.int64).min
    keys[2::991] = np.iinfo(np.int64).max
    assert keys.size > sorting._PARTITION_ABOVE
    positions, ordered = sorted_stably(keys)
    expected = np.argsort(keys, kind="stable")
    assert np.array_equal(positions, expected)
    assert np.array_equal(ordered, keys[expected])


@contextmanager
def _partitioned_from(above: int, size: int) -> Iterator[None]:
    saved = sorting._PARTITION_ABOVE, sorting._PARTITION_SIZE
    sorting._PARTITION_ABOVE, sorting._PARTITION_SIZE = above, size
    try:
        yield
    finally:
        sorting._PARTITION_ABOVE, sorting._PARTITION_SIZE = saved


def test_a_million_random_keys():
    keys = np.random.default_rng(5).integers(-(2**63), 2**63 - 1, 1_000_000, dtype=np.int64)
    keys[::1000] = 42  # one run of a thousand ties
    assert np.array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.integers(-(2**63), 2**63 - 1), max_size=300)
    | st.lists(st.integers(-3, 3), max_size=300)
)
def test_sorted_distinct_is_numpys_unique(values: list[int]) -> None:
    a = np.array(values, dtype=np.int64)
    out = sorted_distinct(a)
    assert out.dtype == a.dtype
    assert np.array_equal(out, np.unique(a))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_infinity=True, allow_nan=True, width=64), max_size=100))
def test_sorted_distinct_keeps_one_nan_as_numpy_does(values: list[float]) -> None:
    a = np.array(values, dtype=np.float64)
    assert np.array_equal(sorted_distinct(a), np.unique(a), equal_nan=True)


def test_sorted_distinct_of_a_matrix_and_of_strings() -> None:
    m = np.array([[3, 1], [1, 2]], dtype=np.int32)
    assert sorted_distinct(m).tolist() == [1, 2, 3] and sorted_distinct(m).dtype == np.int32
    words = np.array(["b", "a", "b"], dtype=object)
    assert sorted_distinct(words).tolist() == ["a", "b"]
