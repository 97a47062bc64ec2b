"""The scan's near-duplicate graph, kept up to date between batches.

Why: the service must give the scan's answer for the same pages. Earlier it grouped pages by
its own rules (tier-2 matches merged transitively, groups split around winners), which on a
re-crawl found a quarter fewer of the exact-Jaccard >= 0.9 pairs than the scan. So the
service now keeps exactly what the scan computes, and changes only what a batch touches:

- equivalence classes: pages with one shingle set collapse to the page with the lowest page
  key (`near_pairs.page_keys`: the URL's hash), which alone is a node of the graph;
- the LSH band index of the nodes (`near_pairs.lsh_shape`, `lsh_keys`);
- the candidate pairs of each bucket by the scan's rule (`kernels.buckets`): all pairs while
  the bucket holds at most `max_bucket_pairs` pages, the chain in page-key order above, so a
  page joining a large bucket replaces the chain link it falls into;
- the verified pairs (`near_pairs.pair_scores` / `passes`, similarity cast to float32 as the
  scan stores it).

After a batch, only the connected components holding a node whose edges, class or weight
changed are clustered again, with the scan's own rule (`kernels.graph`, class sizes as
weights, page keys as tie-breaks). A cluster never crosses a component, and an untouched
component has the same nodes, edges, weights and keys as before, so its clusters stand.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from itertools import pairwise

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from neardup.config import Settings
from neardup.kernels.buckets import CandidateStats, table_pairs, unpack_pairs
from neardup.kernels.graph import (
    Graph,
    center_clusters,
    component_representatives,
    connected_components,
    core_clusters,
)
from neardup.pipeline.steps.near_pairs import lsh_keys, lsh_shape, pair_scores, passes
from neardup.service.band_buckets import BandBuckets
from neardup.service.members import SmallSets

Pair = tuple[str, str]  # (url, url) in increasing order
_VERIFY_CHUNK = 65_536  # candidate pairs verified at a time when opening (their sketches)


class ScanGraph:
    """Classes, band index, candidate counts and verified edges of the eligible pages."""

    def __init__(self, settings: Settings, signature_of: Callable[[str], np.ndarray]) -> None:
        self.settings = settings
        # A node's sketch is its page's (the index's one copy of each signature), asked for
        # when the graph needs it, never copied here.
        self.signature_of = signature_of
        self.bands, self.rows = lsh_shape(settings)
        self.key: dict[str, int] = {}  # page key of each eligible page
        self.fp: dict[str, int] = {}  # shingle-set fingerprint of each eligible page
        self.classes = SmallSets[int]()  # fingerprint -> pages
        self.rep: dict[int, str] = {}  # fingerprint -> its class representative (a node)
        self.buckets = BandBuckets(self.bands)  # the nodes by band key, one table per band
        self.emitted: dict[Pair, int] = {}  # candidate pair -> tables that emit it
        self.adj: dict[str, dict[str, float]] = defaultdict(dict)  # verified edges
        self.verifications = 0  # pairs verified since the index was opened

    def order(self, url: str) -> tuple[int, str]:
        """The tie-break of a page: its key, then (for an exact key collision) its URL."""
        return self.key[url], url

    # ------------------------------------------------------------------ opening

    def load(
        self, urls: list[str], keys: np.ndarray, fps: np.ndarray, sigs: np.ndarray, rows: np.ndarray
    ) -> None:
        """Build the graph of a whole stored index at once, as the scan builds its own:
        the same state `update` reaches page by page (classes, band index, candidate counts,
        verified edges), computed with the scan's kernels over arrays, so opening costs
        sorts and one vectorised verification instead of a walk of every bucket.

        `urls` are the eligible live pages, with their page keys and shingle fingerprints
        (aligned), their sketches the rows `rows` of `sigs`. Only for an empty graph."""
        assert not self.key, "load builds an empty graph"
        n = len(urls)
        if not n:
            return
        keys = np.asarray(keys, dtype=np.int64)
        fps = np.asarray(fps, dtype=np.int64)
        # URL order (Python's str order is Arrow's: UTF-8 bytes sort as code points).
        by_url = np.asarray(pc.sort_indices(pa.array(urls, pa.string())), dtype=np.int64)
        rank = np.empty(n, np.int64)
        rank[by_url] = np.arange(n)
        self.key = dict(zip(urls, keys.tolist(), strict=True))
        self.fp = dict(zip(urls, fps.tolist(), strict=True))
        # Classes: the representative of a shingle set is its first page in (key, URL) order.
        order = np.lexsort((rank, keys, fps))
        sfp = fps[order]
        first = np.ones(n, bool)
        first[1:] = sfp[1:] != sfp[:-1]
        for i in order.tolist():
            self.classes.add(int(fps[i]), urls[i])
        reps = order[first]
        # The nodes in URL order: a pair (a, b) with a < b as ids is one in URL order too.
        reps = reps[np.argsort(rank[reps], kind="stable")]
        node_urls = [urls[i] for i in reps.tolist()]
        for i, u in zip(reps.tolist(), node_urls, strict=True):
            self.rep[int(fps[i])] = u
        node_sigs = sigs[rows[reps]]
        band = lsh_keys(node_sigs, None, self.bands, self.rows)
        self.buckets.add(node_urls, band)
        # Candidates: each table's pairs by the scan's bucket rule (chains in key order),
        # counted over the tables that emit them.
        docs = np.arange(reps.size, dtype=np.int64)
        stats = CandidateStats()
        per_table = [
            table_pairs(
                np.ascontiguousarray(band[:, t]),
                docs,
                self.settings.max_bucket_pairs,
                stats,
                keys[reps],
            )
            for t in range(self.bands)
        ]
        packed, counts = np.unique(np.concatenate(per_table), return_counts=True)
        a, b = unpack_pairs(packed)
        for x, y, c in zip(a.tolist(), b.tolist(), counts.tolist(), strict=True):
            self.emitted[(node_urls[x], node_urls[y])] = c
        for lo in range(0, packed.size, _VERIFY_CHUNK):
            pa_, pb = a[lo : lo + _VERIFY_CHUNK], b[lo : lo + _VERIFY_CHUNK]
            sim, agree = pair_scores(node_sigs[pa_], node_sigs[pb])
            ok = passes(sim, agree, self.settings.threshold, False)
            sim32 = sim.astype(np.float32)
            for x, y, s in zip(pa_[ok].tolist(), pb[ok].tolist(), sim32[ok].tolist(), strict=True):
                u, v = node_urls[x], node_urls[y]
                self.adj[u][v] = self.adj[v][u] = s
        self.verifications += int(packed.size)

    # ------------------------------------------------------------------ updates

    def update(self, gone: Iterable[str], put: dict[str, tuple[int, int]]) -> set[str]:
        """Remove the pages `gone`, add or replace the pages `put` (url -> (page key, shingle
        fingerprint); their signatures already `signature_of` theirs); return the nodes whose
        component must be clustered again."""
        fps: set[int] = set()
        gone = set(gone) - set(put)
        for url in [*gone, *put]:
            if url in self.fp:
                fp = self.fp.pop(url)
                fps.add(fp)
                self.classes.discard(fp, url)
                # the key stays until the buckets are rebuilt below
        for url, (key, fp) in put.items():
            self.key[url], self.fp[url] = key, fp
            self.classes.add(fp, url)
            fps.add(fp)
        leaving: set[str] = set()
        entering: dict[str, int] = {}
        touched: set[str] = set()
        for fp in fps:
            old = self.rep.get(fp)
            members = self.classes.members(fp)
            new = min(members, key=self.order) if members else None
            if old is not None and (old != new or old in put):
                leaving.add(old)
            if new is not None:
                touched.add(new)  # its class size (the node's weight) may have moved
                if new != old or new in put:
                    entering[new] = fp
                self.rep[fp] = new
            else:
                self.rep.pop(fp, None)
        touched |= self._move_nodes(leaving, entering)
        for url in gone:
            self.key.pop(url, None)
        return {u for u in touched if u in self.buckets}

    def _move_nodes(self, leaving: set[str], entering: dict[str, int]) -> set[str]:
        """Take nodes out of and into the band index; update candidate counts and edges.
        Returns every node whose edges changed.

        Only buckets that hold two nodes before or after can hold a candidate pair, and
        nearly every bucket holds one, so the pairs of a bucket are listed only then."""
        new_urls = sorted(entering)
        new_keys = np.empty((0, self.bands), dtype=np.int64)
        if new_urls:
            sigs = np.stack([self.signature_of(u) for u in new_urls])
            new_keys = lsh_keys(sigs, None, self.bands, self.rows)
        old_keys = [self.buckets.keys_of(u) for u in leaving]
        every = np.concatenate([np.stack(old_keys), new_keys]) if old_keys else new_keys
        wanted = [np.unique(every[:, t]) for t in range(self.bands)]
        before = self.buckets.members(wanted)
        self.buckets.remove(list(leaving))
        self.buckets.add(new_urls, new_keys)
        after = self.buckets.members(wanted)
        entered = set(new_urls)
        delta: dict[Pair, int] = defaultdict(int)
        # A node that entered again with a new signature keeps candidates whose count does
        # not move: they are verified again too.
        recheck: set[Pair] = set()
        for old in before.values():
            for pair in self._bucket_pairs(old):
                delta[pair] -= 1
        for new in after.values():
            for pair in self._bucket_pairs(new):
                delta[pair] += 1
                if pair[0] in entered or pair[1] in entered:
                    recheck.add(pair)
        changed: set[str] = set(leaving) | entered
        for url in leaving:  # a leaving node loses every edge, whatever its buckets say
            for other in self.adj.pop(url, {}):
                self.adj[other].pop(url, None)
                changed.add(other)
        for pair, d in delta.items():
            was = self.emitted.get(pair, 0)
            count = was + d
            if count > 0:
                self.emitted[pair] = count
                if not was:  # a new candidate
                    recheck.add(pair)
            else:
                self.emitted.pop(pair, None)
                a, b = pair
                if b in self.adj.get(a, {}):
                    del self.adj[a][b], self.adj[b][a]
                    changed.update(pair)
        changed |= self._verify(recheck)
        return changed

    def _bucket_pairs(self, nodes: list[str]) -> list[Pair]:
        """The scan's candidate rule on one bucket: all pairs, or the chain in key order."""
        members = sorted(nodes, key=self.order)
        if len(members) > self.settings.max_bucket_pairs:
            links = pairwise(members)
        else:
            links = ((a, b) for i, a in enumerate(members) for b in members[i + 1 :])
        return [(a, b) if a < b else (b, a) for a, b in links]

    def _verify(self, pairs: set[Pair]) -> set[str]:
        """Verify candidate pairs (edge in or out); returns the nodes whose edges changed."""
        todo = sorted(p for p in pairs if p[0] in self.buckets and p[1] in self.buckets)
        changed: set[str] = set()
        if not todo:
            return changed
        sim, agree = pair_scores(
            np.stack([self.signature_of(a) for a, _ in todo]),
            np.stack([self.signature_of(b) for _, b in todo]),
        )
        ok = passes(sim, agree, self.settings.threshold, False)
        self.verifications += len(todo)
        for (a, b), s, keep in zip(todo, sim.astype(np.float32).tolist(), ok.tolist(), strict=True):
            old = self.adj.get(a, {}).get(b)
            if keep:
                if old != s:
                    self.adj[a][b] = self.adj[b][a] = s
                    changed.update((a, b))
            elif old is not None:
                del self.adj[a][b], self.adj[b][a]
                changed.update((a, b))
        return changed

    # ------------------------------------------------------------------ lookups

    def similar(self, sig: np.ndarray) -> list[tuple[str, float]]:
        """Pages a sketch would be joined to by the scan: those sharing a band key with it
        whose estimated resemblance passes the scan's verification, with that resemblance
        (class members of a matching node included). The cost is the size of its buckets,
        whatever the size of the index."""
        keys = lsh_keys(sig[None, :], None, self.bands, self.rows)[0]
        found = self.buckets.members([np.array([k], dtype=np.int64) for k in keys.tolist()], 1)
        nodes = sorted({u for members in found.values() for u in members})
        if not nodes:
            return []
        sims, agree = pair_scores(
            np.broadcast_to(sig, (len(nodes), sig.size)),
            np.stack([self.signature_of(u) for u in nodes]),
        )
        ok = passes(sims, agree, self.settings.threshold, False)
        out = []
        for u, s, keep in zip(nodes, sims.tolist(), ok.tolist(), strict=True):
            if keep:
                out.extend((m, float(s)) for m in self._with_class([u]))
        return out

    # ------------------------------------------------------------------ clustering

    def components(self, seeds: Iterable[str]) -> list[list[str]]:
        """The connected components (of verified edges) holding `seeds`, each in tie-break
        order."""
        seen: set[str] = set()
        out = []
        for seed in sorted(seeds):
            if seed in seen or seed not in self.buckets:
                continue
            comp, stack = [], [seed]
            seen.add(seed)
            while stack:
                u = stack.pop()
                comp.append(u)
                for v in self.adj.get(u, {}):
                    if v not in seen:
                        seen.add(v)
                        stack.append(v)
            out.append(sorted(comp, key=self.order))
        return out

    def cluster(self, components: list[list[str]]) -> list[list[str]]:
        """The clusters of whole components by the scan's rule: lists of pages (class
        members included), each with the scan's representative first.

        A component of one node is its own cluster. The others are clustered in one call
        over their union: the rule never looks across a component (every step follows
        edges, and ties are broken by page keys, whose order inside a component does not
        depend on the other nodes), which is why the scan can cluster the whole graph at
        once and the service only the components a batch touched, with the same answer.
        """
        out: list[list[str]] = []
        nodes: list[str] = []
        for comp in components:
            if len(comp) == 1:
                out.append(self._with_class([comp[0]]))
            else:
                nodes.extend(comp)
        if not nodes:
            return out
        n = len(nodes)
        pos = {u: i for i, u in enumerate(nodes)}
        a, b, s = [], [], []
        for u in nodes:
            for v, sim in self.adj.get(u, {}).items():
                if u < v:
                    a.append(pos[u])
                    b.append(pos[v])
                    s.append(sim)
        graph = Graph.from_edges(
            n, np.array(a, np.int64), np.array(b, np.int64), np.array(s, np.float64)
        )
        weight = np.array([self.classes.size(self.fp[u]) for u in nodes], dtype=np.int64)
        tie = np.array([self.key[u] for u in nodes], dtype=np.int64)
        rule = self.settings.cluster_rule
        if rule == "core":
            rep = core_clusters(graph, self.settings.strong_similarity, weight, tie)
        elif rule == "center":
            rep = center_clusters(graph, weight, tiebreak=tie)
        else:
            rep = component_representatives(graph, connected_components(graph), weight, tie)
        groups: dict[int, list[str]] = {}  # the representative node first
        for i, r in enumerate(rep.tolist()):
            members = groups.setdefault(r, [nodes[r]])
            if i != r:
                members.append(nodes[i])
        out.extend(self._with_class(members) for members in groups.values())
        return out

    def _with_class(self, members: list[str]) -> list[str]:
        """Nodes followed each by the other pages of its class (same shingle set)."""
        pages = []
        for u in members:
            pages.append(u)
            cls = self.classes.members(self.fp[u])
            if len(cls) > 1:
                pages.extend(sorted(set(cls) - {u}, key=self.order))
        return pages
