"""A page's class representative: of the pages with its shingle set, the lowest page key,
then the first; checked against a plain grouping."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.pipeline.steps.near_pairs import equivalence_classes


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(-2, 2)), max_size=120))
def test_representative_is_the_lowest_key_then_the_first(rows):
    fp = np.array([f for f, _ in rows], dtype=np.int64)
    keys = np.array([k for _, k in rows], dtype=np.int64)
    best: dict[int, tuple[int, int]] = {}
    for pos, (f, k) in enumerate(rows):
        best[f] = min(best.get(f, (k, pos)), (k, pos))
    expected = [best[f][1] for f, _ in rows]
    assert equivalence_classes(fp, keys).tolist() == expected
