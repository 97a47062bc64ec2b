"""Connected components and centre clusters."""

import numpy as np

from neardup.kernels.graph import (
    Graph,
    center_clusters,
    component_representatives,
    connected_components,
    core_clusters,
)


def graph(n, edges):
    a = np.array([e[0] for e in edges], dtype=np.int64)
    b = np.array([e[1] for e in edges], dtype=np.int64)
    return Graph.from_edges(n, a, b)


def test_components_labelled_by_smallest_member():
    g = graph(6, [(4, 5), (1, 2), (2, 3)])
    assert connected_components(g).tolist() == [0, 1, 1, 1, 4, 4]


def test_chain_is_one_component_but_split_into_centre_clusters():
    # A chain 0-1-2-3-4: transitively one blob; under the centre rule every member must be
    # adjacent (verified) to its representative, so the chain breaks into stars.
    g = graph(5, [(0, 1), (1, 2), (2, 3), (3, 4)])
    assert set(connected_components(g).tolist()) == {0}
    rep = center_clusters(g)
    for node, r in enumerate(rep.tolist()):
        assert r == node or r in g.indices[g.indptr[node] : g.indptr[node + 1]].tolist()
    assert len(set(rep.tolist())) >= 2


def test_star_centre_is_the_hub():
    g = graph(5, [(0, 3), (1, 3), (2, 3), (3, 4)])
    assert center_clusters(g).tolist() == [3, 3, 3, 3, 3]


def test_weight_breaks_degree_ties_then_lowest_index():
    g = graph(2, [(0, 1)])
    assert center_clusters(g).tolist() == [0, 0]
    assert center_clusters(g, np.array([1, 5])).tolist() == [1, 1]


def test_component_representatives_pick_the_hub():
    g = graph(6, [(0, 2), (1, 2), (2, 3), (4, 5)])
    labels = connected_components(g)
    assert component_representatives(g, labels).tolist() == [2, 2, 2, 2, 4, 4]


def test_empty_graph():
    g = Graph.from_edges(0, np.empty(0), np.empty(0))
    assert connected_components(g).size == 0
    assert center_clusters(g).size == 0


def test_page_joins_its_most_similar_centre():
    # Hubs 0 and 1 (degree 3) are centres; page 4 is adjacent to both and joins the more
    # similar one even though hub 0 comes first in visit order.
    edges = [(0, 2), (0, 3), (0, 4), (1, 4), (1, 5), (1, 6)]
    sims = np.array([0.9, 0.9, 0.82, 0.97, 0.9, 0.9])
    a = np.array([e[0] for e in edges])
    b = np.array([e[1] for e in edges])
    rep = center_clusters(Graph.from_edges(7, a, b, sims))
    assert rep.tolist() == [0, 1, 0, 0, 1, 1, 1]


def test_core_rule_keeps_strong_chains_and_splits_weak_ones():
    # 0-1-2 linked by strong pairs (0.95) form one core, whatever the centres; 3-4-5 is a
    # chain of weak pairs (0.82) that must not become one cluster through 4.
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    sims = np.array([0.95, 0.95, 0.82, 0.82, 0.82])
    a = np.array([e[0] for e in edges])
    b = np.array([e[1] for e in edges])
    g = Graph.from_edges(6, a, b, sims)
    rep = core_clusters(g, 0.9)
    assert rep[0] == rep[1] == rep[2] == rep[3] == 1  # the core is the centre; 1 its hub
    assert rep[4] == rep[5] == 4
    # every representative is a member of its own cluster
    assert all(rep[r] == r for r in set(rep.tolist()))


def test_ties_go_to_the_lowest_key_not_the_lowest_index():
    # Two nodes of equal degree and weight: without keys node 0 is the centre; with keys the
    # node with the smaller key is, whatever its index.
    g = graph(2, [(0, 1)])
    assert center_clusters(g).tolist() == [0, 0]
    assert center_clusters(g, tiebreak=np.array([5, -3])).tolist() == [1, 1]
    assert component_representatives(g, connected_components(g), None, [5, -3]).tolist() == [1, 1]
    # Equal keys: the index decides.
    assert center_clusters(g, tiebreak=np.array([7, 7])).tolist() == [0, 0]


def test_core_representative_is_the_lowest_key_of_the_centre_core():
    # Cores {0,1} and {2,3} (strong links), joined by a weak link 1-2; equal sizes, so the
    # core holding the lowest key (node 3) is the centre, and its representative is its node
    # of highest degree (2). By index, core {0,1} wins and node 1 represents it.
    g = Graph.from_edges(4, np.array([0, 2, 1]), np.array([1, 3, 2]), np.array([0.95, 0.95, 0.85]))
    keys = np.array([40, 30, 20, 10])
    assert core_clusters(g, 0.9, None, keys).tolist() == [2, 2, 2, 2]
    assert core_clusters(g, 0.9).tolist() == [1, 1, 1, 1]


def test_rules_with_keys_do_not_depend_on_node_numbering():
    # Renumbering the nodes (the input order) while each keeps its key must give each node
    # the same representative node, for every rule, on graphs full of ties.
    rng = np.random.default_rng(3)
    for _ in range(30):
        n = 25
        a, b = rng.integers(0, n, 60), rng.integers(0, n, 60)
        keep = a < b
        pairs = np.unique(np.stack([a[keep], b[keep]], 1), axis=0)
        sim = rng.choice([0.85, 0.95], pairs.shape[0])
        weight = rng.integers(1, 3, n)
        keys = rng.permutation(n).astype(np.int64) * 1000
        perm = rng.permutation(n)  # new index of each old node
        inv = np.argsort(perm)
        g1 = Graph.from_edges(n, pairs[:, 0], pairs[:, 1], sim)
        g2 = Graph.from_edges(n, perm[pairs[:, 0]], perm[pairs[:, 1]], sim)
        rules = [
            lambda g, w, k: core_clusters(g, 0.9, w, k),
            lambda g, w, k: center_clusters(g, w, tiebreak=k),
            lambda g, w, k: component_representatives(g, connected_components(g), w, k),
        ]
        for rule in rules:
            r1 = rule(g1, weight, keys)
            r2 = rule(g2, weight[inv], keys[inv])
            assert perm[r1].tolist() == r2[perm].tolist()
