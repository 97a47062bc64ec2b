"""Ties of the page key (URLs that normalize to one identity have one `url_key`) are broken
the same way by the scan and the index: the class representative and the cluster
representative are the same page.

The scan breaks a tie of keys by doc_id, its input order; the reference scan reads its
pages in URL order (`conftest.scan_partition`), so the index, which has no input order,
breaks it by URL. The index is fed in the reverse order, in two batches, so that slot
order (the order pages entered the index) would give the other answer."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
from update_ops import texts

from neardup import scan
from neardup.config import Settings
from neardup.index.state.scangraph import ScanGraph
from neardup.pipeline.steps.near_pairs import url_key
from neardup.service import PageUpdate, ServiceIndex


def _pages() -> dict[str, str]:
    t = texts()
    return {
        # One identity (one page key) three times: two copies and a light edit.
        "https://T.example/p": t[0],
        "https://t.example/p": t[0],
        "https://t.example:443/p": t[3],
        # An exact copy under another key, and the light edit again under a third.
        "https://z.example/q": t[1],
        "https://y.example/r": t[3],
    }


def _scan_reps(pages: dict[str, str], folder: Path) -> tuple[dict[str, str], set[str]]:
    """(URL -> its class representative's URL, the cluster representatives) of a scan
    reading `pages` in URL order."""
    folder.mkdir(parents=True)
    path = folder / "pages.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for url, text in sorted(pages.items()):
            fh.write(json.dumps({"url": url, "text": text}) + "\n")
    run = scan([path], folder / "run", Settings(), workers=1).path
    con = duckdb.connect(str(run / "neardup.duckdb"), read_only=True)
    try:
        rows = con.sql("SELECT doc_id, url, class_id, is_representative FROM pages").fetchall()
    finally:
        con.close()
    url_of = {doc: url for doc, url, _, _ in rows}
    classes = {url: url_of[cls] for _, url, cls, _ in rows}
    return classes, {url for _, url, _, rep in rows if rep}


def _index_reps(pages: dict[str, str], store: Path) -> tuple[dict[str, str], set[str]]:
    """The same two answers from the index's graph, fed in reverse URL order."""
    urls = sorted(pages, reverse=True)
    with ServiceIndex(store, Settings()) as ix:
        ix.apply([PageUpdate(u, text=pages[u]) for u in urls[:2]])
        ix.apply([PageUpdate(u, text=pages[u]) for u in urls[2:]])
        graph = ix.scan_graph
        url = ix.pages.url_at
        classes: dict[str, str] = {}
        for u in pages:
            slot = ix.pages[u].slot
            rep = graph._rep(int(graph.mfp[slot]))
            assert rep is not None
            classes[u] = url(rep)
        nodes = [s for s in range(ix.pages.n) if graph.is_node(s)]
        clusters = graph.cluster(graph.components(nodes))
        # The graph built at once (an index opened without saved arrays) picks the same.
        built = ScanGraph(ix.settings, ix.pages)
        slots = np.arange(ix.pages.n, dtype=np.int64)
        built.build(slots[built.eligible(slots)])
        assert built.view()[4] == graph.view()[4]
        return classes, {url(c[0]) for c in clusters}


def test_the_index_breaks_page_key_ties_as_the_scan_does(tmp_path):
    pages = _pages()
    keys = {url_key(u) for u in pages}
    assert len(keys) == 3  # not vacuous: three URLs share one key
    want_classes, want_reps = _scan_reps(pages, tmp_path / "scan")
    got_classes, got_reps = _index_reps(pages, tmp_path / "store")
    assert got_classes == want_classes
    assert got_reps == want_reps
    # Not vacuous: the tie decides a class (the two copies under one key) ...
    assert want_classes["https://t.example/p"] == want_classes["https://T.example/p"]
    assert len(set(want_classes.values())) == 2
