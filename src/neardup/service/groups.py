"""Duplicate groups from signatures: winner choice, connected components and repair.

Pure functions of a group's pages (URLs, signatures, popularity), shared by the incremental
index and the full recomputation it is measured against (bench/service_bench.py), so both
apply one rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from neardup.kernels.graph import Graph, connected_components
from neardup.service.tier2 import agreement_matrix
from neardup.service.updates import ServiceOptions


def winner_key(url: str, links_in: int, suffixes: Sequence[str] = ()) -> tuple:
    """Sort key of a would-be winner, best first.

    In-link popularity first (the page users and other sites point to), then static over
    dynamic URLs (no '?': more stable, better for users), then the shorter URL, then the
    market's preferred domain suffix, then the URL itself so that the choice is total and
    the same in every process.
    """
    host = (urlsplit(url).hostname or "").lower()
    rank = next((i for i, s in enumerate(suffixes) if host.endswith(s)), len(suffixes))
    return (-links_in, "?" in url, len(url), rank, url)


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, x: Any) -> Any:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def partition_group(
    urls: list[str],
    sigs: np.ndarray,
    links_in: list[int],
    threshold: float,
    options: ServiceOptions,
) -> list[list[int]]:
    """Groups (lists of indexes, winner first) of pages that were one group.

    Connected components of verified pairs (all pairs of the group are compared: a group is
    small next to the index), then the repair rule: a component where more than
    `repair_share` of the losers fail verification against the winner is split around
    winners (greedy: the best page and everything verified against it, then the rest).
    Shared by the incremental index and the full recomputation it is measured against.
    `links_in` is each page's popularity (own in-links plus those of pages redirecting to it).
    """
    n = len(urls)
    need = int(np.ceil(threshold * sigs.shape[1] - 1e-9)) if n else 0
    if n > 1:
        ii, jj = np.nonzero(np.triu(agreement_matrix(np.ascontiguousarray(sigs)) >= need, 1))
    else:
        ii = jj = np.empty(0, dtype=np.int64)
    # components in the order of their smallest member, members ascending
    comps: dict[int, list[int]] = {}
    for i, label in enumerate(connected_components(Graph.from_edges(n, ii, jj)).tolist()):
        comps.setdefault(label, []).append(i)
    out: list[list[int]] = []
    for comp in comps.values():
        out.extend(settle_component(comp, urls, sigs, links_in, threshold, options))
    return out


def settle_component(
    comp: list[int],
    urls: list[str],
    sigs: np.ndarray,
    links_in: list[int],
    threshold: float,
    options: ServiceOptions,
) -> list[list[int]]:
    """One component as one group (winner first), or split around winners when repaired."""
    order = sorted(comp, key=lambda i: winner_key(urls[i], links_in[i], options.preferred_suffixes))
    sims = (sigs[order] == sigs[order[0]]).mean(-1)
    losers = len(order) - 1
    failed = int((sims[1:] < threshold).sum())
    if losers < options.repair_min_losers or failed <= options.repair_share * losers:
        return [order]
    out = []
    rest = order
    while rest:
        sims = (sigs[rest] == sigs[rest[0]]).mean(-1)
        keep = sims >= threshold
        keep[0] = True
        out.append([i for i, k in zip(rest, keep, strict=True) if k])
        rest = [i for i, k in zip(rest, keep, strict=True) if not k]
    return out
