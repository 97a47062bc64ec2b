"""The graph's changes since its save (`files/graph_changes.py`): written as arrays, put into
a graph made from the same save, they give the graph the batches built; and the batch's
apply (`state/apply_batch.py`) changes memory only."""

from __future__ import annotations

import numpy as np
import pytest
from crawl_texts import near_copies

import neardup.index.index_saves as index_saves_module
from neardup.index.files.graph_changes import (
    CHANGE_ARRAYS_SINCE,
    graph_changes,
    slot_changes_into,
    take_changes,
)
from neardup.index.files.saves import read_arrays, write_arrays
from neardup.index.opening import changes_arrays, read_graph
from neardup.index.state.apply_batch import compute_batch
from neardup.index.state.arrays import RowBlocks
from neardup.index.state.scangraph import GRAPH_ARRAYS, SLOT_COLUMNS, ScanGraph
from neardup.index.state.updates import SelfRedirect
from neardup.service import PageUpdate, ServiceIndex
from neardup.store.file_vectors import whole

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


@pytest.mark.parametrize("by_node", [True, False])
def test_changes_put_into_the_save_give_the_graph_the_batches_built(saved_then_changed, by_node):
    """Also as changes written before the band delta's keys were kept by node too
    (`by_node` False: sorted by node on opening instead)."""
    ix = saved_then_changed
    name = str(ix.graph_meta["name"])
    # Written as a writer that closes writes them, and read back as an opening reads them.
    saved = read_arrays(ix.store, name, SLOT_COLUMNS)
    write_arrays(ix.store, "changes-x", graph_changes(ix.scan_graph, saved["member"].size))
    changes = changes_arrays(ix.store, "changes-x")
    assert changes["slots"].size > 0  # not vacuous: the batches after the save changed slots
    assert all(changes[k] is not None for k in CHANGE_ARRAYS_SINCE)  # written, and read
    # The slots listed (those the batches wrote) hold every slot whose columns differ
    # from the save's files, found by comparing them whole.
    m = min(ix.pages.n, saved["member"].size)
    differ = np.zeros(m, bool)
    for column in SLOT_COLUMNS:
        differ |= np.asarray(getattr(ix.scan_graph, column)[:m]) != saved[column][:m]
    assert differ.any()  # not vacuous
    listed = np.asarray(changes["slots"])
    assert set(np.flatnonzero(differ).tolist()) <= set(listed.tolist())
    assert set(range(m, ix.pages.n)) <= set(listed.tolist())
    assert listed.size == np.unique(listed).size
    if not by_node:
        changes.update(node_slots=None, node_keys=None)
    arrays = read_graph(ix.store, name, GRAPH_ARRAYS)
    slot_changes_into(arrays, changes)
    graph = ScanGraph(ix.settings, ix.pages, arrays)
    take_changes(graph, changes)
    assert graph.view() == ix.scan_graph.view()
    # Every node of the delta has the keys the writer filed it under, and none other.
    built, taken = ix.scan_graph.buckets, graph.buckets
    delta = np.unique(np.concatenate(built.delta_slots)).tolist()
    assert delta  # not vacuous
    for slot in range(ix.pages.n):
        want, got = built.keys_of(slot), taken.keys_of(slot)
        assert (want is None) == (got is None)
        if want is not None:
            assert np.array_equal(want, got)
    # Every bucket holds the writer's nodes, in its order; after nodes leave too, and the
    # changes written after it are the writer's.
    keys = [
        np.unique(np.concatenate([built.delta_keys[t], whole(built.base_keys[t])]))
        for t in range(built.tables)
    ]
    assert taken.members(keys, 1) == built.members(keys, 1)
    built.remove(delta[:2])
    taken.remove(delta[:2])
    assert taken.members(keys, 1) == built.members(keys, 1)
    for k in ("delta_keys", "delta_slots", "node_slots", "node_keys", "stash_slots", "dead"):
        assert np.array_equal(_as_arrays(built.changes())[k], _as_arrays(taken.changes())[k]), k
    # The save alone is not the graph the batches built.
    bare = ScanGraph(ix.settings, ix.pages, read_graph(ix.store, name, GRAPH_ARRAYS))
    assert bare.view() != ix.scan_graph.view()


def _as_arrays(items) -> dict[str, np.ndarray]:
    """The files `write_arrays` would write of `items` (arrays, `RowBlocks`), in memory."""
    out = {}
    for item in items:
        if isinstance(item, RowBlocks):
            blocks = list(item.blocks)
            for i, (key, (shape, dtype)) in enumerate(item.specs.items()):
                parts = [b[i] for b in blocks]
                out[key] = np.concatenate(parts) if parts else np.zeros(shape, dtype)
                assert out[key].shape == shape and out[key].dtype == dtype
        else:
            out[item[0]] = item[1]
    return out


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
