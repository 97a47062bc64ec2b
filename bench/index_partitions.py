"""How evenly an index's pages and band entries would spread over machines (issue 27, item 4).

The Ask.com service this index follows splits its state over many machines and asks how
loaded the most loaded one is against the mean. For an index folder this measures, for
each number of shards P:

- *page shards*: each live page to shard `page key mod P` (the page key is the hash of the
  normalised URL that the index already keeps): pages on the fullest shard over the mean;
- *band shards*: each entry of the band index (a node's key in one table) to the shard of a
  hash of (table, key), so that a bucket stays whole on one shard, as the scan's bucket rule
  needs: entries on the fullest shard over the mean, and the largest bucket, which no
  sharding can split;
- *the multidimensional length mapping* (tier 2's partitions, paper 004 §4): the cells of
  the `dims` x `parts` grid fitted to the pages' length vectors, mapped onto P machines
  largest first (`lengths.assign_machines`): pages on the fullest machine over the mean.

    .venv/bin/python bench/index_partitions.py STORE [--shards 8 64 512] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

from neardup.index.state.lengths import LengthMap, assign_machines
from neardup.service import ServiceIndex

_MIX = np.uint64(0x9E3779B97F4A7C15)


def _spread(keys: np.ndarray, salt: int) -> np.ndarray:
    """A 64-bit mix of keys (splitmix64's finaliser): shard = value mod P."""
    with np.errstate(over="ignore"):
        x = keys.astype(np.uint64) ^ (np.uint64(salt) * _MIX)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _load(shard: np.ndarray, shards: int) -> dict[str, float]:
    counts = np.bincount(shard.astype(np.int64), minlength=shards)
    return {
        "max": int(counts.max()),
        "mean": float(counts.mean()),
        "max_over_mean": round(float(counts.max() / counts.mean()), 4) if counts.sum() else 0.0,
    }


def measure(store: Path, shard_counts: list[int]) -> dict[str, object]:
    t0 = time.perf_counter()
    with ServiceIndex(store, read_only=True) as ix:
        t = ix.pages
        n = t.n
        live = np.flatnonzero(~t.removed[:n] & t.has_sig[:n])
        page_keys = t.key[live]
        buckets = ix.scan_graph.buckets
        tables = []
        for table in range(buckets.tables):
            keys = np.asarray(buckets.base_keys[table])
            slots = np.asarray(buckets.base_slots[table])
            alive = ~buckets.base_dead[slots] if slots.size else np.zeros(0, bool)
            keys = np.concatenate([keys[alive], buckets.delta_keys[table]])
            tables.append(keys)
        lens = np.asarray(t.lens[live], dtype=np.float64)
        opts = ix.options
    opened = time.perf_counter() - t0
    largest = 0
    for keys in tables:
        if keys.size:
            _, runs = np.unique(keys, return_counts=True)
            largest = max(largest, int(runs.max()))
    grid = LengthMap.fit(lens, 0.8, opts.parts)
    cells = np.bincount(grid.cells(lens), minlength=int(np.prod(grid.shape)))
    out: dict[str, object] = {
        "store": str(store),
        "pages": int(live.size),
        "band_tables": len(tables),
        "band_entries": int(sum(k.size for k in tables)),
        "largest_bucket": largest,
        "length_grid": {"dims": opts.dims, "parts": opts.parts, "cells": int(cells.size)},
        "open_s": round(opened, 2),
        "shards": [],
    }
    for p in shard_counts:
        band = np.concatenate(
            [_spread(k, i + 1) % np.uint64(p) for i, k in enumerate(tables) if k.size]
        )
        machines = assign_machines(cells, p)
        length_load = np.bincount(machines, weights=cells, minlength=p)
        out["shards"].append(  # type: ignore[union-attr]
            {
                "P": p,
                "pages": _load(_spread(page_keys, 0) % np.uint64(p), p),
                "band_entries": _load(band, p),
                "length_cells": {
                    "max_over_mean": round(float(length_load.max() / length_load.mean()), 4),
                    "nonempty_cells": int((cells > 0).sum()),
                },
            }
        )
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("store", type=Path)
    ap.add_argument("--shards", type=int, nargs="+", default=[8, 64, 512])
    ap.add_argument("--json", action="store_true", help="the figures as JSON")
    a = ap.parse_args(argv)
    res = measure(a.store, a.shards)
    if a.json:
        print(json.dumps(res, indent=2))
        return 0
    print(
        f"{res['pages']:,} pages, {res['band_entries']:,} band entries in "
        f"{res['band_tables']} tables, largest bucket {res['largest_bucket']}"
    )
    print("| P | pages: max / mean | band entries: max / mean | length cells: max / mean |")
    print("|---:|---:|---:|---:|")
    for row in res["shards"]:  # type: ignore[union-attr]
        print(
            f"| {row['P']} | {row['pages']['max_over_mean']:.3f} "
            f"| {row['band_entries']['max_over_mean']:.3f} "
            f"| {row['length_cells']['max_over_mean']:.3f} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
