"""The service's array band index against a plain dict of sets, through merges and leaves."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.service.band_buckets import BandBuckets

TABLES = 3


def reference_members(ref: dict[str, np.ndarray], keys: list[np.ndarray], at_least: int):
    out: dict[tuple[int, int], set[str]] = {}
    for url, ks in ref.items():
        for t in range(TABLES):
            if ks[t] in set(keys[t].tolist()):
                out.setdefault((t, int(ks[t])), set()).add(url)
    return {b: m for b, m in out.items() if len(m) >= at_least}


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.booleans(), st.integers(0, 40), st.lists(st.integers(0, 6), min_size=3, max_size=3)
        ),
        min_size=1,
        max_size=120,
    )
)
def test_members_equal_a_dict_of_sets(ops):
    """Adds (with few distinct keys, so buckets fill) and leaves in any order; small batches
    so that the delta is merged into the base many times."""
    bb = BandBuckets(TABLES)
    ref: dict[str, np.ndarray] = {}
    for add, n, keys in ops:
        url = f"u{n}"
        if url in ref:
            bb.remove([url])
            del ref[url]
        if add:
            ks = np.array([keys], dtype=np.int64)
            bb.add([url], ks)
            ref[url] = ks[0]
        assert set(ref) == {u for u in ref if u in bb} and len(bb) == len(ref)
    wanted = [np.arange(7, dtype=np.int64) for _ in range(TABLES)]
    for at_least in (1, 2):
        got = {b: set(m) for b, m in bb.members(wanted, at_least).items()}
        assert got == reference_members(ref, wanted, at_least)
    for url, ks in ref.items():
        assert bb.keys_of(url).tolist() == ks.tolist()


def test_large_batches_merge_into_the_base_and_drop_dead_nodes():
    rng = np.random.default_rng(1)
    bb = BandBuckets(TABLES)
    ref: dict[str, np.ndarray] = {}
    for step in range(6):
        urls = [f"p{step}-{i}" for i in range(30_000)]
        keys = rng.integers(0, 50_000, size=(len(urls), TABLES), dtype=np.int64)
        bb.add(urls, keys)
        ref.update(zip(urls, keys, strict=True))
        gone = [u for u in list(ref)[::3] if u in ref]
        bb.remove(gone)
        for u in gone:
            del ref[u]
    # the levels hold only live entries after a merge, every live node is found, and the
    # ids were numbered again once most of them belonged to nodes that left
    assert bb.base.size > 0
    assert len(bb.url_of) <= 2 * max(len(ref), 1024) + 30_000
    sample = rng.choice(len(ref), 200, replace=False)
    urls = list(ref)
    wanted = [np.unique([ref[urls[i]][t] for i in sample]) for t in range(TABLES)]
    got = {b: set(m) for b, m in bb.members(wanted, 1).items()}
    assert got == reference_members(ref, wanted, 1)


def test_churn_keeps_slots_bounded_and_members_right():
    """The same 2,000 pages replaced again and again (a service re-crawling its pages): the
    slots stay within a small multiple of the live nodes, and lookups stay exact."""
    rng = np.random.default_rng(2)
    bb = BandBuckets(TABLES)
    ref: dict[str, np.ndarray] = {}
    urls = [f"u{i}" for i in range(2000)]
    for _ in range(40):
        keys = rng.integers(0, 3000, size=(len(urls), TABLES), dtype=np.int64)
        bb.remove([u for u in urls if u in ref])
        bb.add(urls, keys)
        ref = dict(zip(urls, keys, strict=True))
        assert len(bb.url_of) <= 2 * 2 * 2000 + 2000
    wanted = [np.unique(np.stack(list(ref.values()))[:, t]) for t in range(TABLES)]
    got = {b: set(m) for b, m in bb.members(wanted, 1).items()}
    assert got == reference_members(ref, wanted, 1)
    for url, ks in ref.items():
        assert bb.keys_of(url).tolist() == ks.tolist()
