"""The `pairs` table and the clusters written by parts give what the whole arrays give
(issue 47, item 4).

A generated graph: pages in classes (a representative and its members, the representative
not always the class's first page), verified edges between class representatives with
similarities and super-shingle agreements, random signatures. The edges and the classes
are dealt into parts (saved as `.npy` files and read through `MappedRows`, as the near
stage's tasks read them), and written with windows and slices smaller than the data so
that every part is cut. References, computed here from the whole arrays: the table sorted
as plain Python tuples; the components and identical groups by a plain label propagation; the
cluster rule by `cluster_graph` over every class representative, as the cluster stage ran
it before the parts; the resemblance to the representative by counting equal positions.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from neardup.config import Settings
from neardup.pipeline.steps import clusters
from neardup.pipeline.steps.clusters import PageArrays, cluster_graph, cluster_parts
from neardup.pipeline.steps.near_pairs import MappedRows
from neardup.pipeline.steps.pair_rows import edge_rows, identical_rows, write_pair_rows

PAGES = 400
K = 16


def _graph(seed: int) -> dict[str, np.ndarray]:
    """Per-page arrays and verified edges between class representatives (a < b)."""
    rng = np.random.default_rng(seed)
    docs = np.cumsum(rng.integers(1, 5, PAGES)).astype(np.int64)
    class_rep = np.arange(PAGES, dtype=np.int64)
    grouped = rng.permutation(PAGES)[:160].reshape(40, 4)
    for group in grouped:  # classes of 2-4 pages, the representative any of them
        group = group[: rng.integers(2, 5)]
        class_rep[group] = rng.choice(group)
    reps = np.flatnonzero(class_rep == np.arange(PAGES))
    chosen = rng.choice(reps, (300, 2))
    chosen = np.sort(chosen[chosen[:, 0] != chosen[:, 1]], axis=1)
    pairs = np.unique(chosen, axis=0)
    pairs = pairs[rng.permutation(len(pairs))]
    return {
        "docs": docs,
        "rows": rng.permutation(PAGES).astype(np.int64),
        "class_rep": class_rep,
        "keys": rng.integers(0, 1 << 40, PAGES),
        "a": pairs[:, 0],
        "b": pairs[:, 1],
        "similarity": rng.uniform(0.5, 1, len(pairs)),
        "agree": rng.integers(-1, 7, len(pairs)).astype(np.int8),
    }


def _parts(g: dict[str, np.ndarray], folder: Path, count: int) -> tuple[list, list]:
    """The edges dealt into `count` parts by a hash, the classes by their representative,
    each sorted where it is made, saved and mapped per read."""
    folder.mkdir(exist_ok=True)
    edge_part = (g["a"] * 7919 + g["b"]) % count
    class_part = (g["class_rep"] * 31) % count
    edges, classes = [], []
    for p in range(count):
        mine = edge_part == p
        np.save(
            folder / f"edges-{p}.npy",
            edge_rows(g["a"][mine], g["b"][mine], g["similarity"][mine], g["agree"][mine]),
        )
        edges.append(MappedRows(folder / f"edges-{p}.npy"))
        pages = np.flatnonzero(class_part == p)
        np.save(folder / f"same-{p}.npy", identical_rows(pages, g["class_rep"][pages]))
        classes.append(MappedRows(folder / f"same-{p}.npy"))
    return edges, classes


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("count", [1, 3, 8])
def test_pairs_by_parts_are_the_whole_table(seed, count, tmp_path):
    g = _graph(seed)
    edges, classes = _parts(g, tmp_path / "parts", count)
    written = write_pair_rows(
        tmp_path / "pairs.parquet", g["docs"], [*edges, *classes], PAGES, window=37
    )
    docs = g["docs"]
    want = [
        (int(docs[a]), int(docs[b]), float(np.float32(s)), None if x < 0 else int(x), "near")
        for a, b, s, x in zip(g["a"], g["b"], g["similarity"], g["agree"], strict=True)
    ]
    want += [
        (int(docs[r]), int(docs[p]), 1.0, None, "identical")
        for p, r in enumerate(g["class_rep"])
        if r != p
    ]
    want.sort(key=lambda row: (row[0], row[1]))
    got = pq.read_table(tmp_path / "pairs.parquet").to_pylist()
    assert [tuple(row.values()) for row in got] == want
    assert written == len(want)
    assert sum(1 for row in want if row[4] == "identical") > 20


def _smallest_linked(n: int, a: np.ndarray, b: np.ndarray) -> list[int]:
    """Each node's smallest node of its connected component: both ends of every edge take
    the smaller of their labels until no label changes (plain Python)."""
    label = list(range(n))
    changed = True
    while changed:
        changed = False
        for x, y in zip(a.tolist(), b.tolist(), strict=True):
            low = min(label[x], label[y])
            if label[x] != low or label[y] != low:
                label[x] = label[y] = low
                changed = True
    return label


RULES = {
    "core": Settings(method="supershingles"),
    "center": Settings(cluster_rule="center"),
    "transitive": Settings(cluster_rule="transitive", method="supershingles"),
}


@pytest.mark.parametrize("rule", sorted(RULES))
@pytest.mark.parametrize("count", [1, 4])
def test_clusters_by_parts_are_the_whole_graphs(rule, count, tmp_path, monkeypatch):
    settings = RULES[rule]
    g = _graph(len(rule) + count)
    signatures = np.random.default_rng(5).integers(0, 3, (PAGES, K)).astype(np.uint64)
    np.save(tmp_path / "signatures.npy", signatures)
    edges, classes = _parts(g, tmp_path / "parts", count)
    pages = PageArrays(g["docs"], g["rows"], g["class_rep"], g["keys"])
    monkeypatch.setattr(clusters, "ASSIGN_SLICE", 53)
    monkeypatch.setattr(clusters, "RESEMBLANCE_ROWS", 11)
    found = cluster_parts(tmp_path, pages, edges, classes, settings)
    got = pq.read_table(tmp_path / "assignments.parquet").to_pydict()

    docs, class_rep = g["docs"], g["class_rep"]
    assert got["doc_id"] == docs.tolist()
    assert got["class_id"] == docs[class_rep].tolist()
    smallest = _smallest_linked(PAGES, g["a"], g["b"])
    assert got["component_id"] == docs[np.array(smallest)[class_rep]].tolist()
    full = g["agree"] == settings.supershingle_count
    same = np.array(_smallest_linked(PAGES, g["a"][full], g["b"][full]))
    assert got["identical_id"] == docs[same[class_rep]].tolist()

    # the rule over every class representative, as the whole arrays gave it before
    reps = np.flatnonzero(class_rep == np.arange(PAGES))
    node_of = np.searchsorted(reps, class_rep)
    cluster_node, _, _ = cluster_graph(
        reps.size,
        np.searchsorted(reps, g["a"]),
        np.searchsorted(reps, g["b"]),
        g["similarity"].astype(np.float32),
        g["agree"],
        np.bincount(node_of, minlength=reps.size),
        g["keys"][reps],
        settings,
    )
    rep_of = reps[cluster_node[node_of]]
    assert got["cluster_id"] == docs[rep_of].tolist()
    sig_a, sig_b = signatures[g["rows"]], signatures[g["rows"][rep_of]]
    want = [float(np.float32((x == y).sum() / K)) for x, y in zip(sig_a, sig_b, strict=True)]
    assert got["similarity_to_representative"] == want
    sizes = np.unique(got["cluster_id"], return_counts=True)[1]
    assert found == int((sizes >= 2).sum())
    assert (rep_of != np.arange(PAGES)).sum() > 10  # pages moved to another's cluster
