"""Connected components of a graph held as a DataFrame of edges, never on the driver.

Large-star / small-star (Kiveris et al., "Connected Components in MapReduce and Beyond",
2014): each round, every node links its larger neighbours to the smallest node it sees
(large-star), then links its smaller neighbours, and itself, to the smallest among them
(small-star). Both steps are a group-by and a join, so a node of any degree is just a large
group, never a Python list, and the edge count never grows. The rounds stop when every
edge points from a node to its component's smallest node, which takes O(log n) rounds,
also on long chains. Each round's edges are materialised (checkpointed) so the query plan
does not grow with the number of rounds.
"""

from __future__ import annotations

from typing import Any

MAX_ROUNDS = 64


def _undirected(edges: Any) -> Any:
    """Both directions of every edge, self-loops and repeats dropped."""
    from pyspark.sql import functions as F

    forward = edges.select(F.col("a").alias("u"), F.col("b").alias("v"))
    backward = edges.select(F.col("b").alias("u"), F.col("a").alias("v"))
    return forward.unionByName(backward).where("u <> v").distinct()


def _large_star(edges: Any) -> Any:
    """Every node u links each neighbour v > u to the smallest of u and its neighbours."""
    from pyspark.sql import functions as F

    both = _undirected(edges)
    smallest = both.groupBy("u").agg(F.least(F.min("v"), F.col("u")).alias("m"))
    linked = (
        both.where("v > u").join(smallest, "u").select(F.col("v").alias("a"), F.col("m").alias("b"))
    )
    return linked.where("a <> b").distinct()


def _small_star(edges: Any) -> Any:
    """Every node u links itself and each neighbour v < u to the smallest such neighbour."""
    from pyspark.sql import functions as F

    down = edges.select(F.greatest("a", "b").alias("u"), F.least("a", "b").alias("v")).where(
        "u <> v"
    )
    smallest = down.groupBy("u").agg(F.min("v").alias("m"))
    linked = (
        down.join(smallest, "u")
        .select(F.col("v").alias("a"), F.col("m").alias("b"))
        .unionByName(smallest.select(F.col("u").alias("a"), F.col("m").alias("b")))
    )
    return linked.where("a <> b").distinct()


def _converged(edges: Any) -> bool:
    """True when the edges form stars: each node has one parent and parents are roots."""
    from pyspark.sql import functions as F

    down = edges.select(F.greatest("a", "b").alias("u"), F.least("a", "b").alias("v"))
    several_parents = down.groupBy("u").agg(F.countDistinct("v").alias("n")).where("n > 1")
    if not several_parents.isEmpty():
        return False
    parents = down.select(F.col("v").alias("u")).distinct()
    return down.join(parents, "u").isEmpty()


def connected_components(edges: Any, checkpoint: Any = None, max_rounds: int = MAX_ROUNDS) -> Any:
    """(node, component) for every node of `edges` (columns `a`, `b`, integer ids); the
    component is its smallest node. Nodes without edges are not in the output.

    `checkpoint(df, name)` materialises a round's edges and returns them read back (the
    Spark engine writes them as Parquet in its work directory); by default a local
    checkpoint is used.
    """
    from pyspark.sql import functions as F

    def keep(df: Any, name: str) -> Any:
        return checkpoint(df, name) if checkpoint is not None else df.localCheckpoint()

    current = keep(edges.select("a", "b").where("a <> b").distinct(), "cc-0")
    for round_no in range(1, max_rounds + 1):
        current = keep(_large_star(current), f"cc-{round_no}-large")
        current = keep(_small_star(current), f"cc-{round_no}-small")
        if _converged(current):
            break
    else:  # pragma: no cover - O(log n) rounds suffice for any graph that fits a cluster
        raise RuntimeError(f"connected components did not converge in {max_rounds} rounds")
    down = current.select(F.greatest("a", "b").alias("node"), F.least("a", "b").alias("component"))
    roots = down.select(F.col("component").alias("node"), "component").distinct()
    return down.unionByName(roots).distinct()
