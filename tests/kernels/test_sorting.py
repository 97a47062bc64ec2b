"""Stable sorts of int64 keys (`kernels/sorting.py`) against numpy's own stable sorts."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from neardup.kernels.sorting import lexsort_pair, stable_argsort

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


def test_a_million_random_keys():
    keys = np.random.default_rng(5).integers(-(2**63), 2**63 - 1, 1_000_000, dtype=np.int64)
    keys[::1000] = 42  # one run of a thousand ties
    assert np.array_equal(stable_argsort(keys), np.argsort(keys, kind="stable"))
