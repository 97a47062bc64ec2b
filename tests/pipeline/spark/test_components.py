"""Connected components on Spark agree with scipy on chains, stars, giant components."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components as scipy_components
from spark_session import spark  # noqa: F401 - the fixture

from neardup.pipeline.executors.spark.components import connected_components


def expected(a: np.ndarray, b: np.ndarray) -> dict[int, int]:
    """node -> smallest node of its component, for the nodes that have edges."""
    nodes = np.unique(np.concatenate([a, b]))
    index = {int(n): i for i, n in enumerate(nodes)}
    rows = [index[int(x)] for x in a]
    cols = [index[int(x)] for x in b]
    matrix = coo_matrix((np.ones(len(rows)), (rows, cols)), shape=(nodes.size, nodes.size))
    _, labels = scipy_components(matrix, directed=False)
    smallest: dict[int, int] = {}
    for node, label in zip(nodes.tolist(), labels.tolist(), strict=True):
        smallest[label] = min(smallest.get(label, node), node)
    return {
        node: smallest[label] for node, label in zip(nodes.tolist(), labels.tolist(), strict=True)
    }


def components(spark, a: np.ndarray, b: np.ndarray) -> dict[int, int]:  # noqa: F811
    df = spark.createDataFrame(
        [(int(x), int(y)) for x, y in zip(a, b, strict=True)], "a bigint, b bigint"
    )
    return {r["node"]: r["component"] for r in connected_components(df).collect()}


def test_long_chain_in_shuffled_order(spark):  # noqa: F811
    rng = np.random.default_rng(1)
    order = rng.permutation(2000) * 7 + 3  # ids far from 0..n, in random order
    a, b = order[:-1], order[1:]
    got = components(spark, a, b)
    assert got == expected(a, b)
    assert set(got.values()) == {int(order.min())}


def test_stars_and_a_giant_component_with_isolated_pairs(spark):  # noqa: F811
    hubs = [10_000, 20_000, 30_000]
    a = [h for h in hubs for _ in range(300)]
    b = [h + 1 + i for h in hubs for i in range(300)]
    # Join the first two stars through a leaf, and add separate pairs.
    a += [10_005, 50_000, 50_002]
    b += [20_007, 50_001, 50_003]
    a_arr, b_arr = np.array(a), np.array(b)
    got = components(spark, a_arr, b_arr)
    assert got == expected(a_arr, b_arr)
    assert len(set(got.values())) == 4


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_graphs_match_scipy(spark, seed):  # noqa: F811
    rng = np.random.default_rng(seed)
    n = 3000
    a = rng.integers(0, n, 2500)
    b = rng.integers(0, n, 2500)
    keep = a != b
    got = components(spark, a[keep], b[keep])
    assert got == expected(a[keep], b[keep])
