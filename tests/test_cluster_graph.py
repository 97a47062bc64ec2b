"""Connected components and centre clusters."""

import numpy as np

from neardup.cluster import Graph, center_clusters, component_representatives, connected_components


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
