"""Clusters from verified pairs: connected components and representative-centred clusters."""

from neardup.cluster.graph import (
    Graph,
    center_clusters,
    component_representatives,
    connected_components,
    core_clusters,
)

__all__ = [
    "Graph",
    "center_clusters",
    "component_representatives",
    "connected_components",
    "core_clusters",
]
