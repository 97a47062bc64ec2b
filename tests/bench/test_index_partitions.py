"""bench/index_partitions.py on a small index: every live page and band entry is placed on
exactly one shard, a bucket never splits, and the loads it reports are those placements'."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from crawl_texts import near_copies

from neardup.service import PageUpdate, ServiceIndex

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import index_partitions


def test_shard_loads_account_for_every_page_and_entry(tmp_path):
    store = tmp_path / "s"
    texts = near_copies(300, 3, vocab=600, words=120, bases=5, edits=8)
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate(f"https://h{i % 7}.test/p{i}", text=t) for i, t in enumerate(texts)])
        ix.apply([PageUpdate("https://h0.test/p0", remove=True)])
        nodes = int(np.count_nonzero(ix.scan_graph.node))
        tables = ix.scan_graph.buckets.tables
    res = index_partitions.measure(store, [1, 4, 16])
    assert res["pages"] == 299
    assert res["band_entries"] == nodes * tables  # one key a node and table
    for row in res["shards"]:
        p = row["P"]
        assert round(row["pages"]["mean"] * p) == 299
        assert round(row["band_entries"]["mean"] * p) == nodes * tables
        assert row["pages"]["max_over_mean"] >= 1.0 and row["band_entries"]["max_over_mean"] >= 1.0
        if p == 1:
            assert row["pages"]["max_over_mean"] == row["length_cells"]["max_over_mean"] == 1.0
    # a bucket (one key of one table) always lands on one shard
    keys = np.array([5, 5, 9, 9, 9], np.int64)
    shard = index_partitions._spread(keys, 3) % np.uint64(16)
    assert len(set(shard[:2].tolist())) == 1 and len(set(shard[2:].tolist())) == 1
