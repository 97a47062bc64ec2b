"""`SmallSets` (a URL per key, a set only from two on) answers as a dict of sets does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from neardup.service.members import SmallSets

ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "discard", "set", "pop"]),
        st.integers(0, 4),
        st.lists(st.sampled_from(["a", "b", "c", "d"]), max_size=3),
    ),
    max_size=60,
)


@given(ops)
def test_small_sets_equal_a_dict_of_sets(seq):
    got: SmallSets[int] = SmallSets()
    want: dict[int, set[str]] = {}
    for op, key, urls in seq:
        if op == "add" and urls:
            got.add(key, urls[0])
            want.setdefault(key, set()).add(urls[0])
        elif op == "discard" and urls:
            got.discard(key, urls[0])
            want.get(key, set()).discard(urls[0])
        elif op == "set":
            got[key] = urls
            want[key] = set(urls)
        elif op == "pop":
            assert set(got.pop(key) or ()) == want.pop(key, set())
        want = {k: v for k, v in want.items() if v}  # an emptied key is gone
        assert {k: set(v) for k, v in got.items()} == want
        assert len(got) == len(want) and all(got.size(k) == len(v) for k, v in want.items())
        assert set(got.members(key)) == want.get(key, set()) and (key in got) == (key in want)
