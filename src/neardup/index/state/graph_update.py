"""A batch's change of the scan graph: pages leave and enter their classes, nodes leave and
enter the band index, candidate counts move by the scan's bucket rule, and the pairs whose
candidacy or sketch changed are verified again.

Why a module of its own: this is the one place the graph changes page by page (a batch, or
opening replaying the rows written after the save), and it must reach the state the scan's
build over the same pages reaches (`graph_build.py`); it returns the nodes whose component
must be clustered again (`graph_clusters.py`), and nothing else moves.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import pairwise
from typing import TYPE_CHECKING

import numpy as np

from neardup.index.state.graph_keys import keys_of
from neardup.index.state.lookups import BatchLookups, ScorePairs
from neardup.kernels.sorting import sorted_distinct
from neardup.pipeline.steps.near_pairs import lsh_keys, passes

if TYPE_CHECKING:
    from neardup.index.state.scangraph import ScanGraph

LOW32 = (1 << 32) - 1  # the second page of a packed pair (`pack`)


def pack(a: int, b: int) -> int:
    """A pair of slots as one int64, the lower slot first."""
    return (a << 32) | b if a < b else (b << 32) | a


def update_graph(
    graph: ScanGraph, gone: Iterable[int], put: dict[int, int], lookups: BatchLookups
) -> set[int]:
    """Remove the pages `gone`, add or replace the pages `put` (slot -> shingle fingerprint;
    their signatures and keys already the page table's); return the nodes whose component
    must be clustered again. `lookups`: what the batch's engine found of the saved arrays
    elsewhere."""
    graph._fit()
    classes = graph.classes
    gone = set(gone) - set(put)
    fps: set[int] = set(put.values())
    for s in [*gone, *put]:
        if graph.member[s]:
            fps.add(int(graph.mfp[s]))
    classes.load(fps, lookups.classes)
    old_rep = {fp: graph._rep(fp) for fp in fps}
    for s in [*gone, *put]:
        if graph.member[s]:
            classes.mutable(int(graph.mfp[s])).discard(s)
            graph.member[s] = False
    for s, fp in put.items():
        graph.member[s], graph.mfp[s] = True, fp
        classes.mutable(fp).add(s)
    graph.note_written([*gone, *put])
    leaving: set[int] = set()
    entering: dict[int, int] = {}
    touched: set[int] = set()
    for fp in fps:
        old = old_rep[fp]
        members = classes.members(fp)
        new = graph.ordered(members)[0] if members else None
        if old is not None and (old != new or old in put):
            leaving.add(old)
        if new is not None:
            touched.add(new)  # its class size (the node's weight) may have moved
            if new != old or new in put:
                entering[new] = fp
    touched |= _move_nodes(graph, leaving, entering, lookups)
    classes.over.freeze()  # the batch is done with these classes
    return {s for s in touched if graph.node[s]}


def _move_nodes(
    graph: ScanGraph, leaving: set[int], entering: dict[int, int], lookups: BatchLookups
) -> set[int]:
    """Take nodes out of and into the band index; update candidate counts and edges.
    Returns every node whose edges changed.

    Only buckets that hold two nodes before or after can hold a candidate pair, and nearly
    every bucket holds one, so the pairs of a bucket are listed only then."""
    edges, counts = graph.edges, graph.pairs
    new_slots = sorted(entering)
    new_keys = np.empty((0, graph.bands), dtype=np.int64)
    if new_slots:
        new_keys = lsh_keys(graph.pages.sigs[new_slots], None, graph.bands, graph.rows)
    every = np.concatenate([keys_of(graph, sorted(leaving), lookups.node_keys), new_keys])
    wanted = [sorted_distinct(every[:, t]) for t in range(graph.bands)]
    base = graph.buckets.base_hits(wanted, lookups.band)  # (the same before and after)
    before = graph.buckets.members(wanted, base=base)
    graph.buckets.remove(list(leaving))
    for s in leaving:
        graph.node[s] = False
    graph.buckets.add(new_slots, new_keys)
    for s in new_slots:
        graph.node[s] = True
    graph.note_written([*leaving, *new_slots])
    after = graph.buckets.members(wanted, base=base)
    entered = set(new_slots)
    delta: dict[int, int] = defaultdict(int)
    # A node that entered again with a new signature keeps candidates whose count does not
    # move: they are verified again too.
    recheck: set[int] = set()
    for old in before.values():
        for pair in bucket_pairs(graph, old):
            delta[pair] -= 1
    for new in after.values():
        for pair in bucket_pairs(graph, new):
            delta[pair] += 1
            if pair >> 32 in entered or pair & LOW32 in entered:
                recheck.add(pair)
    changed: set[int] = set(leaving) | entered
    for u in leaving:  # a leaving node loses every edge, whatever its buckets say
        for other in list(edges.neighbours(u)):
            edges.mutable(other).pop(u, None)
            changed.add(other)
        edges.over[u] = {}
    keys = np.fromiter(delta, np.int64, len(delta))
    base = counts.base_counts(keys)
    for pair, d, b in zip(keys.tolist(), delta.values(), base.tolist(), strict=True):
        was = counts.over.get(pair, b)
        count = was + d
        if count > 0:
            counts.over[pair] = count
            if not was:  # a new candidate
                recheck.add(pair)
        else:
            counts.over[pair] = 0
            a, b_ = pair >> 32, pair & LOW32
            if b_ in edges.neighbours(a):
                edges.mutable(a).pop(b_, None)
                edges.mutable(b_).pop(a, None)
                changed.update((a, b_))
    changed |= _verify(graph, recheck, lookups.score)
    return changed


def bucket_pairs(graph: ScanGraph, nodes: list[int]) -> list[int]:
    """The scan's candidate rule on one bucket: all pairs while it holds at most
    `max_bucket_pairs` nodes, else the chain in key order; packed (`pack`)."""
    members = graph.ordered(nodes)
    if len(members) > graph.settings.max_bucket_pairs:
        links = pairwise(members)
    else:
        links = ((a, b) for i, a in enumerate(members) for b in members[i + 1 :])
    return [pack(a, b) for a, b in links]


def _verify(graph: ScanGraph, pairs: set[int], score: ScorePairs | None = None) -> set[int]:
    """Verify candidate pairs (edge in or out); returns the nodes whose edges changed."""
    todo = sorted(p for p in pairs if graph.node[p >> 32] and graph.node[p & LOW32])
    changed: set[int] = set()
    if not todo:
        return changed
    edges = graph.edges
    packed = np.array(todo, np.int64)
    a, b = packed >> 32, packed & LOW32
    sim = graph.pages.resemblance(a, b, score)  # where the saved sketches are (Spark)
    ok = passes(sim, np.full(sim.size, -1), graph.settings.threshold, False)
    graph.verifications += len(todo)
    for x, y, s, keep in zip(
        a.tolist(), b.tolist(), sim.astype(np.float32).tolist(), ok.tolist(), strict=True
    ):
        old = edges.neighbours(x).get(y)
        if keep:
            if old != s:
                edges.mutable(x)[y] = s
                edges.mutable(y)[x] = s
                changed.update((x, y))
        elif old is not None:
            edges.mutable(x).pop(y, None)
            edges.mutable(y).pop(x, None)
            changed.update((x, y))
    return changed
