"""The service gives the scan's answer: after any sequence of updates, its groups are the
clusters `neardup.scan` finds among the final pages.

The corpus is real text (standard-library docstring pages) with exact copies, light edits,
drifting chains of edits and truncations, so pairs fall on both sides of the threshold and of
the core rule's strong similarity, and components split into several clusters. Random
batches add pages, change them (to another variant or another document), delete them, turn
them into redirects, and reopen the index (which rebuilds the graph from the stored rows).
The reference is a scan of the final live pages written as JSONL, in an order unrelated to
the updates.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from update_ops import op, texts, url

import neardup.index.index_saves as index_saves_module
from neardup.config import Settings
from neardup.service import PageUpdate, ServiceIndex

CONFIGS = {
    "default": Settings(),
    # Most buckets above the cap: their candidates are chains in page-key order.
    "chains": Settings(max_bucket_pairs=2),
    "center": Settings(cluster_rule="center", threshold=0.7),
    # Chains again, with the graph's arrays saved after every batch (and mapped on reopening).
    "saved": Settings(max_bucket_pairs=2),
}


@pytest.mark.parametrize("config", list(CONFIGS))
@settings(
    max_examples=5,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batches=st.lists(st.lists(op, min_size=1, max_size=12), min_size=2, max_size=6))
def test_updates_give_the_partition_of_a_scan_of_the_final_pages(
    config, batches, tmp_path_factory, scanned, monkeypatch
):
    cfg = CONFIGS[config]
    if config == "saved":
        monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 0)
        monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_SHARE", 10**9)
    pool = texts()
    base = tmp_path_factory.mktemp(config)
    store = base / "store"
    final: dict[str, str | None] = {}  # url -> text (None: removed or a redirect)
    ix = ServiceIndex(store, cfg)
    try:
        for batch in batches:
            updates = []
            for kind, i, j in batch:
                if kind == "reopen":
                    ix.close()
                    ix = ServiceIndex(store)
                elif kind == "put":
                    updates.append(PageUpdate(url(i), text=pool[j]))
                    final[url(i)] = pool[j]
                elif kind == "remove":
                    updates.append(PageUpdate(url(i), remove=True))
                    final[url(i)] = None
                elif i != j:
                    updates.append(PageUpdate(url(i), redirect_to=url(j)))
                    final[url(i)] = None
            if updates:
                ix.apply(updates)
        live = {u: t for u, t in final.items() if t is not None}
        got = {frozenset(m) for m in ix.groups.values() if m}
        assert ix.consistency_errors() == []
        if config == "saved" and ix.manifest.version > 1:  # every batch saved the arrays
            assert ix.graph_meta is not None
    finally:
        ix.close()
    if not live:
        assert got == set()
        return
    assert got == scanned(live, cfg)


@settings(
    max_examples=4,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_drifting_chains_fed_in_any_order_match_the_scan(data, tmp_path_factory, scanned):
    # Two documents' variants, chains included, fed in a random order and random batches,
    # then a few removed: every example has components the core rule splits.
    pool = texts()[:16]
    order = data.draw(st.permutations(range(16)), label="order")
    cuts = sorted(data.draw(st.sets(st.integers(1, 15), max_size=5), label="cuts"))
    gone = data.draw(st.sets(st.sampled_from(range(16)), max_size=3), label="removed")
    with ServiceIndex(tmp_path_factory.mktemp("chains") / "store") as ix:
        for lo, hi in zip([0, *cuts], [*cuts, 16], strict=True):
            ix.apply([PageUpdate(url(i), text=pool[i]) for i in order[lo:hi]])
        if gone:
            ix.apply([PageUpdate(url(i), remove=True) for i in sorted(gone)])
        got = {frozenset(m) for m in ix.groups.values() if m}
        assert ix.consistency_errors() == []
    want = scanned({url(i): pool[i] for i in range(16) if i not in gone}, Settings())
    assert got == want
    # Not vacuous: a document's pages fall into several groups, some of several pages.
    first_doc = {url(i) for i in range(8) if i not in gone}
    assert len([g for g in want if g & first_doc]) >= 2
    assert any(len(g) >= 2 for g in want)
