"""The graph's changes since its save (`files/graph_changes.py`): written as arrays, put into
a graph made from the same save, they give the graph the batches built; and the batch's
apply (`state/apply_batch.py`) changes memory only."""

from __future__ import annotations

import numpy as np
import pytest
from crawl_texts import near_copies

import neardup.index.index_saves as index_saves_module
from neardup.index.files.graph_changes import graph_changes, slot_changes_into, take_changes
from neardup.index.files.saves import read_arrays
from neardup.index.state.apply_batch import compute_batch
from neardup.index.state.scangraph import GRAPH_ARRAYS, SLOT_COLUMNS, ScanGraph
from neardup.index.state.updates import SelfRedirect
from neardup.service import PageUpdate, ServiceIndex

TEXTS = near_copies(120, seed=9, vocab=400, words=90, bases=6, edits=8)


def _url(i: int) -> str:
    return f"https://g{i % 5}.example/{i}"


@pytest.fixture
def saved_then_changed(tmp_path, monkeypatch):
    """An index whose graph was saved after 80 pages, then changed by batches not saved."""
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 0)
    ix = ServiceIndex(tmp_path / "s")
    ix.apply([PageUpdate(_url(i), text=TEXTS[i]) for i in range(80)])
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 10**9)
    ix.apply([PageUpdate(_url(i), text=TEXTS[i]) for i in range(80, 120)])
    ix.apply([PageUpdate(_url(i), text=TEXTS[(i + 7) % 120]) for i in range(0, 40, 4)])
    ix.apply([PageUpdate(_url(5), remove=True), PageUpdate(_url(6), redirect_to=_url(7))])
    yield ix
    ix.close()


def test_changes_put_into_the_save_give_the_graph_the_batches_built(saved_then_changed):
    ix = saved_then_changed
    name = str(ix.graph_meta["name"])
    changes = graph_changes(ix.scan_graph, read_arrays(ix.store, name, SLOT_COLUMNS))
    assert changes["slots"].size > 0  # not vacuous: the batches after the save changed slots
    arrays = read_arrays(ix.store, name, GRAPH_ARRAYS, writable=True)
    slot_changes_into(arrays, changes)
    graph = ScanGraph(ix.settings, ix.pages, arrays)
    take_changes(graph, changes)
    assert graph.view() == ix.scan_graph.view()
    # The save alone is not the graph the batches built.
    bare = ScanGraph(ix.settings, ix.pages, read_arrays(ix.store, name, GRAPH_ARRAYS, True))
    assert bare.view() != ix.scan_graph.view()


def test_the_apply_changes_memory_and_writes_nothing(saved_then_changed):
    ix = saved_then_changed
    files = sorted(p.name for p in ix.store.iterdir())
    version = ix.manifest.version
    batch = [PageUpdate(_url(200), text=TEXTS[3]), PageUpdate(_url(9), remove=True)]
    report, dirty, groups, _ = compute_batch(ix.state, ix.prepared(batch))
    assert (report.new, report.removed) == (1, 1)
    assert {_url(200), _url(9)} <= dirty
    # The new page joined the group of the page whose text it copies.
    gid = ix.pages[_url(200)].group_id
    assert gid in groups and _url(3) in ix.groups[gid]
    assert not np.isin(_url(9), list(ix.groups[gid]))
    assert sorted(p.name for p in ix.store.iterdir()) == files  # no file written
    assert ix.manifest.version == version


def test_a_self_redirect_is_refused_by_the_apply(saved_then_changed):
    ix = saved_then_changed
    with pytest.raises(SelfRedirect):
        compute_batch(ix.state, ix.prepared([PageUpdate(_url(1), redirect_to=_url(1))]))
