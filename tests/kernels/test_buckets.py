"""Candidate pairs from bucket keys."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.kernels.buckets import (
    CandidateStats,
    bucket_candidates,
    key_parts,
    partition_pairs,
    table_pairs,
    unpack_pairs,
)
from neardup.kernels.sorting import _order_ties


def pairs_of(keys, docs, max_bucket=64):
    packed, stats = bucket_candidates(
        np.asarray(keys, dtype=np.int64), np.asarray(docs), max_bucket
    )
    a, b = unpack_pairs(packed)
    return set(zip(a.tolist(), b.tolist(), strict=True)), stats


def test_pairs_share_a_key_in_the_same_table_only():
    # docs 0 and 1 share key 7 in table 0; docs 1 and 2 share key 9 in table 1;
    # doc 3 has key 7 but in table 1, which must not meet doc 0's table-0 key 7.
    keys = [[7, 1], [7, 9], [5, 9], [6, 7]]
    pairs, stats = pairs_of(keys, [0, 1, 2, 3])
    assert pairs == {(0, 1), (1, 2)}
    assert stats.tables == 2
    assert stats.unique == 2


def test_pair_found_in_several_tables_is_reported_once():
    keys = [[1, 2, 3], [1, 2, 3]]
    pairs, stats = pairs_of(keys, [10, 20])
    assert pairs == {(10, 20)}
    assert stats.emitted == 3 and stats.unique == 1


def test_small_bucket_gives_all_pairs_large_bucket_a_chain():
    docs = list(range(6))
    all_pairs, _ = pairs_of([[1]] * 6, docs, max_bucket=6)
    assert len(all_pairs) == 15
    chain, stats = pairs_of([[1]] * 6, docs, max_bucket=5)
    assert chain == {(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)}
    assert stats.large_buckets == 1 and stats.largest_bucket == 6


def test_smaller_id_first_whatever_the_input_order():
    pairs, _ = pairs_of([[4], [4]], [9, 3])
    assert pairs == {(3, 9)}


def test_ids_must_fit_in_31_bits():
    with pytest.raises(ValueError):
        bucket_candidates(np.zeros((1, 1), dtype=np.int64), np.array([2**31]), 8)


def test_large_bucket_chain_follows_the_order_key():
    # One bucket of four above the cap: the chain links the documents in key order
    # 11 (key 0), 13 (1), 12 (2), 10 (3), each pair smaller id first.
    keys = np.zeros((4, 1), dtype=np.int64)
    docs = np.array([10, 11, 12, 13])
    packed, _ = bucket_candidates(keys, docs, 2, order=np.array([3, 0, 2, 1]))
    a, b = unpack_pairs(packed)
    assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == [(10, 12), (11, 13), (12, 13)]
    packed, _ = bucket_candidates(keys, docs, 2)  # without keys: id order
    a, b = unpack_pairs(packed)
    assert sorted(zip(a.tolist(), b.tolist(), strict=True)) == [(10, 11), (11, 12), (12, 13)]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 5), min_size=1, max_size=80),
    st.integers(1, 40),
    st.randoms(use_true_random=False),
)
def test_table_pairs_follow_the_order_in_every_bucket(key_choice, max_bucket, rnd):
    """Few distinct keys (long runs of equal keys, some past the insertion-sort length):
    one table's pairs are what a plain grouping gives, each bucket's documents taken in
    (order, doc) order, all pairs while small, a chain when large."""
    n = len(key_choice)
    keys = np.array([k * 0x9E3779B97F4A7C15 % 2**61 for k in key_choice], dtype=np.int64)
    docs = np.array(rnd.sample(range(1000), n), dtype=np.int64)
    order = np.array([rnd.randrange(4) for _ in range(n)], dtype=np.int64)
    stats = CandidateStats()
    got = table_pairs(keys, docs, max_bucket, stats, order=order)
    buckets: dict[int, list[tuple[int, int]]] = {}
    for key, doc, o in zip(keys.tolist(), docs.tolist(), order.tolist(), strict=True):
        buckets.setdefault(key, []).append((o, doc))
    expected = []
    for members in buckets.values():
        ids = [doc for _, doc in sorted(members)]
        if len(ids) > max_bucket:
            links = list(itertools.pairwise(ids))
        else:
            links = [(ids[p], ids[q]) for p in range(len(ids)) for q in range(p + 1, len(ids))]
        expected += [(min(a, b) << 32) | max(a, b) for a, b in links]
    assert sorted(got.tolist()) == sorted(expected)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=0, max_size=200))
def test_ties_ordered_as_a_stable_sort_orders_them(values):
    keys = np.array(values, dtype=np.int64)
    positions = np.argsort(keys)
    sorted_keys = keys[positions]
    _order_ties(sorted_keys, positions)
    assert np.array_equal(positions, np.argsort(keys, kind="stable"))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.lists(st.integers(0, 4), min_size=3, max_size=3), min_size=1, max_size=60),
    st.integers(1, 6),
    st.integers(1, 5),
    st.randoms(use_true_random=False),
)
def test_parts_of_the_keys_give_the_pairs_of_all(key_choice, max_bucket, parts, rnd):
    """Keys dealt into parts by (table, key) (`key_parts`) and paired part by part
    (`partition_pairs`, as the embedded scan's workers and Spark's tasks do): the union of
    the parts' pairs, and the summed figures, are `bucket_candidates`'s over all keys."""
    keys = np.array([[k * 0x9E3779B97F4A7C15 % 2**61 for k in row] for row in key_choice])
    n, tables = keys.shape
    docs = np.arange(n, dtype=np.int64)
    order = np.array([rnd.randrange(3) for _ in range(n)], dtype=np.int64)
    want, want_stats = bucket_candidates(keys, docs, max_bucket, order)
    tbl = np.tile(np.arange(tables), n)
    flat, doc = keys.reshape(-1), np.repeat(docs, tables)
    part = key_parts(tbl, flat, parts)
    stats = CandidateStats()
    found = [
        partition_pairs(tbl[m], flat[m], doc[m], order[doc[m]], max_bucket, stats)
        for m in (part == p for p in range(parts))
    ]
    assert sorted(set(np.concatenate(found).tolist())) == want.tolist()
    assert (stats.emitted, stats.large_buckets) == (want_stats.emitted, want_stats.large_buckets)
    assert stats.largest_bucket == want_stats.largest_bucket
