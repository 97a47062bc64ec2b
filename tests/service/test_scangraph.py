"""The scan graph (`ScanGraph`) on its own: built at once, changed batch by batch, and saved.

Each test makes its corpus here: min-hash sketches drawn at random in families (a base,
variants with a few values changed, a drifting chain), each sketch a shingle set of its own
fingerprint, and URLs put on them (several URLs on one sketch make a class; five URLs share
one page key, so ties fall to the URL). The sketches are drawn, not computed from texts, so
that every resemblance is a known share of equal values and every band is a known tuple.

The reference is plain Python over the pages as the test put them, not the graph's code:
the classes and their representative (lowest page key, then URL), the buckets of each band
table (nodes whose band rows are equal), the scan's bucket rule (all pairs up to
`max_bucket_pairs` nodes, the chain in key order above), the candidates' counts, the
verified edges (share of equal values at or above the threshold) and, for the transitive
rule, the clusters: a union-find over the edges, each represented by its node of the most
edges, then the largest class, then the lowest key.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from functools import cache
from itertools import combinations, pairwise

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.config import Settings
from neardup.index.files.band_save import band_writer
from neardup.index.files.saves import write_arrays
from neardup.index.opening import read_graph
from neardup.index.state.pages import PageTable
from neardup.index.state.scangraph import GRAPH_ARRAYS, ScanGraph
from neardup.pipeline.steps.near_pairs import url_key

NUM_PERM, BANDS, ROWS = 32, 8, 4
THRESHOLD = 0.75  # 24 equal values of 32: variants of 8 changed values sit on it
MIN_TOKENS = 5
N_URLS = 24

# An action on one URL: ("doc", d) puts sketch d; ("thin", d) puts it with too few words;
# ("bare",) a page without a sketch; ("remove",).
Action = tuple


def _settings(max_bucket_pairs: int, rule: str) -> Settings:
    return Settings(
        num_perm=NUM_PERM,
        bands=BANDS,
        rows=ROWS,
        threshold=THRESHOLD,
        max_bucket_pairs=max_bucket_pairs,
        cluster_rule=rule,
        min_tokens=MIN_TOKENS,
    )


@cache
def sketches() -> tuple[np.ndarray, ...]:
    """Four families of ten sketches (a base; variants with 2, 4, 6, 8, 9 and 12 values
    changed, around the threshold; a chain of three links of 5 changes each, whose ends are
    below it), and a copy of the first sketch under another fingerprint."""
    rng = np.random.default_rng(48)
    out: list[np.ndarray] = []

    def changed(sig: np.ndarray, k: int) -> np.ndarray:
        new = sig.copy()
        new[rng.choice(NUM_PERM, k, replace=False)] = rng.integers(0, 2**32, k, dtype=np.uint32)
        return new

    for _ in range(4):
        base = rng.integers(0, 2**32, NUM_PERM, dtype=np.uint32)
        out.append(base)
        out.extend(changed(base, k) for k in (2, 4, 6, 8, 9, 12))
        link = base
        for _ in range(3):
            link = changed(link, 5)
            out.append(link)
    out.append(out[0].copy())
    return tuple(out)


def fingerprint(doc: int) -> int:
    return 7_000 + doc


def url(i: int) -> str:
    """Every fifth URL shares one page key with the others of its kind (a fragment)."""
    return f"http://h0.example/shared#{i}" if i % 5 == 0 else f"http://h{i % 3}.example/p{i}"


def order(u: str) -> tuple[int, str]:
    """The tie-break order of pages: page key, then URL."""
    return (url_key(u), u)


# ---------------------------------------------------------------------- the reference


def reference(state: dict[str, Action], max_bucket_pairs: int) -> dict[str, object]:
    """What the graph of these pages holds, computed in plain Python."""
    docs = sketches()
    sig = {u: [int(x) for x in docs[a[1]]] for u, a in state.items() if a[0] == "doc"}
    fp = {u: fingerprint(a[1]) for u, a in state.items() if a[0] == "doc"}
    classes: dict[int, set[str]] = defaultdict(set)
    for u, f in fp.items():
        classes[f].add(u)
    rep = {f: min(members, key=order) for f, members in classes.items()}
    nodes = sorted(rep.values(), key=order)
    counts: Counter[tuple[str, str]] = Counter()
    buckets: list[set[frozenset[str]]] = []
    for t in range(BANDS):
        bucket: dict[tuple[int, ...], list[str]] = defaultdict(list)
        for u in nodes:  # in key order
            bucket[tuple(sig[u][t * ROWS : (t + 1) * ROWS])].append(u)
        buckets.append({frozenset(m) for m in bucket.values()})
        for members in bucket.values():
            if len(members) > max_bucket_pairs:
                pairs: Iterable[tuple[str, str]] = pairwise(members)
            else:
                pairs = combinations(members, 2)
            for a, b in pairs:
                counts[(min(a, b), max(a, b))] += 1
    adj: dict[str, dict[str, float]] = {u: {} for u in nodes}
    for a, b in counts:
        share = sum(x == y for x, y in zip(sig[a], sig[b], strict=True)) / NUM_PERM
        if share >= THRESHOLD:
            adj[a][b] = adj[b][a] = float(np.float32(share))
    return {
        "adj": adj,
        "counts": dict(counts),
        "fp": fp,
        "classes": {f: frozenset(m) for f, m in classes.items()},
        "rep": rep,
        "buckets": buckets,
    }


def transitive_clusters(ref: dict[str, object]) -> dict[str, str]:
    """url -> its cluster's representative under the transitive rule: a union-find over
    the edges; the representative the node of most edges, then of the largest class, then
    the first in key order; class members go with their node."""
    adj: dict[str, dict[str, float]] = ref["adj"]  # type: ignore[assignment]
    fp: dict[str, int] = ref["fp"]  # type: ignore[assignment]
    classes: dict[int, frozenset[str]] = ref["classes"]  # type: ignore[assignment]
    parent = {u: u for u in adj}

    def find(u: str) -> str:
        while parent[u] != u:
            parent[u] = parent[parent[u]]
            u = parent[u]
        return u

    for a, nbrs in adj.items():
        for b in nbrs:
            parent[find(a)] = find(b)
    comps: dict[str, list[str]] = defaultdict(list)
    for u in adj:
        comps[find(u)].append(u)
    out: dict[str, str] = {}
    for comp in comps.values():
        best = min(comp, key=lambda u: (-len(adj[u]), -len(classes[fp[u]]), *order(u)))
        for u in comp:
            for member in classes[fp[u]]:
                out[member] = best
    return out


# ---------------------------------------------------------------------- the graph


def put_pages(
    pages: PageTable, graphs: list[ScanGraph], batch: dict[str, Action]
) -> list[set[int]]:
    """A batch as the index applies it: each page's sketch changed (its node's band keys
    kept first, `signature_changing`), then every graph updated; the nodes each graph says
    must be clustered again."""
    gone: set[int] = set()
    put: dict[int, int] = {}
    for u, action in batch.items():
        slot = pages.slot(u)
        p = pages.add(u) if slot is None else pages[u]
        if action[0] == "remove":
            p.removed = True
            gone.add(p.slot)
            continue
        p.removed = False
        for g in graphs:
            g.signature_changing(p.slot)
        if action[0] == "bare":
            pages.set_signature(p.slot, None, 0, None)
            p.shingle_fp, p.n_tokens = None, 0
            gone.add(p.slot)
            continue
        pages.set_signature(p.slot, sketches()[action[1]], 40, None)
        p.shingle_fp = fingerprint(action[1])
        p.n_tokens = MIN_TOKENS - 1 if action[0] == "thin" else 40
        if action[0] == "thin":
            gone.add(p.slot)
        else:
            put[p.slot] = p.shingle_fp
    return [g.update(gone, put) for g in graphs]


def built_at_once(pages: PageTable, s: Settings) -> ScanGraph:
    g = ScanGraph(s, pages)
    slots = np.arange(pages.n, dtype=np.int64)
    g.build(slots[g.eligible(slots)])
    return g


def as_reference(g: ScanGraph) -> dict[str, object]:
    """The graph's own view (`ScanGraph.view`) in the reference's shape; the band keys as
    the partition of the nodes they make in each table."""
    adj, counts, fp, classes, rep, keys = g.view()
    buckets = []
    for t in range(BANDS):
        by_key: dict[int, set[str]] = defaultdict(set)
        for u, k in keys.items():
            by_key[k[t]].add(u)
        buckets.append({frozenset(m) for m in by_key.values()})
    return {
        "adj": adj,
        "counts": counts,
        "fp": fp,
        "classes": classes,
        "rep": rep,
        "buckets": buckets,
    }


def clusters_of(g: ScanGraph, seeds: Iterable[int]) -> dict[str, str]:
    """url -> its cluster's representative, for the components holding `seeds`."""
    url_at = g.pages.url_at
    out = {}
    for cluster in g.cluster(g.components(seeds)):
        for s in cluster:
            out[url_at(s)] = url_at(cluster[0])
    return out


def all_clusters(g: ScanGraph) -> dict[str, str]:
    return clusters_of(g, [s for s in range(g.pages.n) if g.is_node(s)])


# ---------------------------------------------------------------------- strategies

N_DOCS = len(sketches())
action = st.one_of(
    st.tuples(st.just("doc"), st.integers(0, N_DOCS - 1)),
    st.tuples(st.just("doc"), st.integers(0, N_DOCS - 1)),
    st.tuples(st.just("doc"), st.integers(0, 9)),  # the first family: large buckets
    st.tuples(st.just("thin"), st.integers(0, N_DOCS - 1)),
    st.tuples(st.just("bare")),
    st.tuples(st.just("remove")),
)
batch = st.dictionaries(st.integers(0, N_URLS - 1), action, min_size=1, max_size=12)
doc_of_each_url = st.lists(st.integers(0, N_DOCS - 1), min_size=N_URLS, max_size=N_URLS)


# ---------------------------------------------------------------------- tests


@settings(max_examples=30, deadline=None)
@given(doc_of_each_url, st.sampled_from([2, 3, 64]))
def test_a_graph_built_at_once_is_the_plain_reference(docs, max_bucket_pairs):
    s = _settings(max_bucket_pairs, "transitive")
    state: dict[str, Action] = {url(i): ("doc", d) for i, d in enumerate(docs)}
    pages = PageTable(NUM_PERM, 1)
    put_pages(pages, [], state)
    g = built_at_once(pages, s)
    ref = reference(state, max_bucket_pairs)
    assert as_reference(g) == ref
    assert all_clusters(g) == transitive_clusters(ref)


def test_the_corpus_exercises_every_rule():
    """Not vacuous: on every page of the corpus, with chains (max 2 a bucket), the graph
    has classes of several pages, buckets above the cap, candidates that fail
    verification, components of several nodes, and nodes that share a page key."""
    state: dict[str, Action] = {url(i): ("doc", i) for i in range(N_URLS)}
    state.update({f"http://extra.example/{d}": ("doc", d) for d in range(N_URLS, N_DOCS)})
    # classes of several pages: two of one page key (a tie the URL breaks) and a copy
    state.update({url(25): ("doc", 3), url(30): ("doc", 3), "http://copy.example/": ("doc", 7)})
    ref = reference(state, 2)
    g = built_at_once(_pages_of(state), _settings(2, "transitive"))
    assert as_reference(g) == ref
    classes: dict[int, frozenset[str]] = ref["classes"]  # type: ignore[assignment]
    adj: dict[str, dict[str, float]] = ref["adj"]  # type: ignore[assignment]
    counts: dict[tuple[str, str], int] = ref["counts"]  # type: ignore[assignment]
    assert any(len(m) > 1 for m in classes.values())
    assert any(len(b) > 2 for table in ref["buckets"] for b in table)  # type: ignore[attr-defined]
    assert sum(1 for a, b in counts if b not in adj[a]) > 5
    assert sum(1 for a, b in counts if b in adj[a]) > 20
    assert any(len(set(m)) > 2 for m in _components(adj))
    assert max(Counter(url_key(u) for u in adj).values()) > 1  # nodes of one page key
    assert classes[fingerprint(3)] == {url(3), url(25), url(30)}
    assert url_key(url(25)) == url_key(url(30))
    assert min(s for nbrs in adj.values() for s in nbrs.values()) == THRESHOLD


def _pages_of(state: dict[str, Action]) -> PageTable:
    pages = PageTable(NUM_PERM, 1)
    put_pages(pages, [], state)
    return pages


def _components(adj: dict[str, dict[str, float]]) -> list[set[str]]:
    seen: set[str] = set()
    out = []
    for start in adj:
        if start in seen:
            continue
        comp, stack = set(), [start]
        while stack:
            u = stack.pop()
            if u not in comp:
                comp.add(u)
                stack.extend(adj[u])
        seen |= comp
        out.append(comp)
    return out


@settings(max_examples=40, deadline=None)
@given(
    doc_of_each_url,
    st.lists(batch, min_size=1, max_size=6),
    st.sampled_from([2, 3, 64]),
    st.sampled_from(["core", "center", "transitive"]),
    st.booleans(),
)
def test_batches_give_the_graph_and_clusters_built_at_once(first, batches, mbp, rule, built):
    """Pages added, changed (a new sketch, another class, too few words, no sketch) and
    removed batch by batch: the graph equals the one built at once from the final pages
    and the plain reference; and the clusters kept by re-clustering only the components
    of the nodes each update names equal the whole graph's, built at once. The first
    pages go in as a batch, or (`built`) are built at once first, as an index opened
    without saved arrays: then the batches change nodes of the base arrays, filed in the
    band index under the sketches they had."""
    s = _settings(mbp, rule)
    pages = PageTable(NUM_PERM, 1)
    state: dict[str, Action] = {url(i): ("doc", d) for i, d in enumerate(first[: N_URLS // 2])}
    if built:
        put_pages(pages, [], state)
        g = built_at_once(pages, s)
        kept = all_clusters(g)  # url -> its cluster's representative, kept batch by batch
    else:
        g = ScanGraph(s, pages)
        (touched,) = put_pages(pages, [g], state)
        kept = clusters_of(g, touched)
    for b in batches:
        step: dict[str, Action] = {url(i): a for i, a in b.items()}
        (touched,) = put_pages(pages, [g], step)
        state.update(step)
        for u in step:
            kept.pop(u, None)
        kept.update(clusters_of(g, touched))
    ref = reference(state, mbp)
    assert as_reference(g) == ref
    once = built_at_once(pages, s)
    assert as_reference(once) == ref
    assert kept == all_clusters(once)
    assert all_clusters(g) == kept
    if rule == "transitive":
        assert kept == transitive_clusters(ref)


@settings(max_examples=15, deadline=None)
@given(doc_of_each_url, st.lists(batch, min_size=2, max_size=4), st.sampled_from([2, 64]))
def test_a_saved_graph_put_back_is_the_same_graph(tmp_path_factory, first, batches, mbp):
    """The arrays the graph hands the files (`ScanGraph.arrays`), written and mapped back
    (copy-on-write, as an index opens: `read_graph`), make a graph with the same view, which
    takes the next batches as the graph in memory does; saved again from the mapped one (its
    band index written from the save before and its changes, or its base kept and the
    changes written beside it), and put back, the same again."""
    store = tmp_path_factory.mktemp("graph")
    s = _settings(mbp, "core")
    pages = PageTable(NUM_PERM, 1)
    g = ScanGraph(s, pages)
    state: dict[str, Action] = {url(i): ("doc", d) for i, d in enumerate(first[: N_URLS // 2])}
    put_pages(pages, [g], state)
    step: dict[str, Action] = {url(i): a for i, a in batches[0].items()}
    put_pages(pages, [g], step)
    state.update(step)
    mapped, before = g, None
    for n, b in enumerate(batches[1:]):
        name = f"graph-{n}"
        write_arrays(store, name, mapped.arrays(band_writer(), room=n * 7, before=before))
        back = ScanGraph(s, pages, read_graph(store, name, GRAPH_ARRAYS))
        assert back.view() == g.view()
        assert back.edge_count() == g.edge_count()
        assert all_clusters(back) == all_clusters(g)
        # the next batch taken by the graph in memory and by the one put back
        step = {url(i): a for i, a in b.items()}
        touched_g, touched_back = put_pages(pages, [g, back], step)
        state.update(step)
        assert back.view() == g.view()
        assert clusters_of(back, touched_back) == clusters_of(g, touched_g)
        mapped, before = back, store / name
    assert as_reference(g) == reference(state, mbp)


@pytest.mark.parametrize("rule", ["core", "transitive"])
def test_a_page_that_moves_out_of_a_chain_splits_its_component(rule):
    """A hand-made case: a chain a - b - c (each link near, the ends below the threshold);
    b is rewritten to an unrelated sketch, and the update names both sides, so the
    clusters kept by re-clustering them are the clusters of the pages built at once."""
    s = _settings(64, rule)
    base_family = 10 * 1  # the second family: 7, 8, 9 are its chain's links
    chain = [base_family + 7, base_family + 8, base_family + 9]
    state = {url(1): ("doc", base_family), url(2): ("doc", chain[0]), url(3): ("doc", chain[1])}
    ref = reference(state, 64)
    adj: dict[str, dict[str, float]] = ref["adj"]  # type: ignore[assignment]
    assert url(2) in adj[url(1)] and url(3) in adj[url(2)] and url(3) not in adj[url(1)]
    pages = PageTable(NUM_PERM, 1)
    g = ScanGraph(s, pages)
    (touched,) = put_pages(pages, [g], state)
    kept = clusters_of(g, touched)
    if rule == "transitive":
        assert len(set(kept.values())) == 1
    step: dict[str, Action] = {url(2): ("doc", 30)}  # another family altogether
    (touched,) = put_pages(pages, [g], step)
    state.update(step)
    kept.pop(url(2))
    kept.update(clusters_of(g, touched))
    assert kept == all_clusters(built_at_once(pages, s))
    if rule == "transitive":
        assert kept == transitive_clusters(reference(state, 64))
        assert len(set(kept.values())) == 3
