"""The groups as arrays plus an overlay (`GroupMembers`, `Winners`) answer as a dict of sets
and a dict do, from the groups as opened through the changes of batches."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from neardup.service.layout import GROUP_SCHEMA
from neardup.service.members import GroupMembers, Winners
from neardup.service.pages import PageTable

URLS = [f"http://h/{i}" for i in range(8)]

ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "discard", "set", "pop"]),
        st.integers(0, 5),
        st.lists(st.sampled_from(URLS), max_size=3),
    ),
    max_size=60,
)


@given(st.lists(st.integers(-1, 4), min_size=len(URLS), max_size=len(URLS)), ops)
def test_group_members_equal_a_dict_of_sets(opened, seq):
    pages = PageTable(4, 1)
    want: dict[int, set[str]] = {}
    for url, gid in zip(URLS, opened, strict=True):
        pages.add(url).group_id = None if gid < 0 else gid
        if gid >= 0:
            want.setdefault(gid, set()).add(url)
    got = GroupMembers(pages)
    for op, gid, urls in seq:
        if op == "add" and urls:
            got.add(gid, urls[0])
            want.setdefault(gid, set()).add(urls[0])
        elif op == "discard" and urls:
            got.discard(gid, urls[0])
            want.get(gid, set()).discard(urls[0])
        elif op == "set":
            got[gid] = urls
            want[gid] = set(urls)
        elif op == "pop":
            assert set(got.pop(gid, ()) or ()) == want.pop(gid, set())
        live = {g: m for g, m in want.items() if m}
        assert {g: set(m) for g, m in got.items()} == live
        assert len(got) == len(live)
        assert got.count(2) == sum(1 for m in live.values() if len(m) >= 2)
        for g in range(6):
            assert (g in got) == (g in live)
            assert set(got.members(g)) == live.get(g, set())
            assert got.size(g) == len(live.get(g, ()))
            assert (got.get(g) is None) == (g not in live)


@given(
    st.dictionaries(st.integers(0, 9), st.sampled_from(URLS), max_size=8),
    st.lists(st.tuples(st.booleans(), st.integers(0, 12), st.sampled_from(URLS)), max_size=30),
)
def test_winners_equal_a_dict(opened, seq):
    table = pa.table(
        {
            "group_id": list(opened),
            "winner_url": list(opened.values()),
            "size": [1] * len(opened),
            "failed": [0] * len(opened),
        },
        schema=GROUP_SCHEMA,
    )
    got, want = Winners(table), dict(opened)
    for elect, gid, url in seq:
        if elect:
            got[gid] = url
            want[gid] = url
        else:
            assert got.pop(gid, None) == want.pop(gid, None)
        for g in range(13):
            assert got.get(g) == want.get(g)
