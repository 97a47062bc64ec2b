"""Opening an index maps the scan graph's saved arrays (`graph-N/`) and replays the pages
written after them, or builds the graph at once (`ScanGraph.build`, the scan's kernels over
arrays) where none is saved; either way it must be the graph the batches built page by page
(`ScanGraph.update`), and the one built at once from the same pages."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from crawl_texts import near_copies

import neardup.index.index_saves as index_saves_module
import neardup.index.opening as opening_module
from neardup.config import Settings
from neardup.index.files import band_save
from neardup.index.files.saves import write_arrays
from neardup.index.files.segment_rows import TX_MARKER
from neardup.index.files.store import (
    GRAPH_PREFIX,
    GRAPH_SLEEP_HOOK,
    Manifest,
    commit,
    graph_name,
    read_manifest,
)
from neardup.index.state.scangraph import ScanGraph
from neardup.service import PageUpdate, ServiceError, ServiceIndex


def _texts(n: int, seed: int) -> list[str]:
    return near_copies(n, seed, vocab=600, words=120, bases=4, edits=8)


def _graph(ix: ServiceIndex) -> tuple[object, ...]:
    """The graph keyed by URL: edges, candidate counts, classes, representatives, band keys."""
    adj, emitted, fp, classes, rep, keys = ix.scan_graph.view()
    return ({u: v for u, v in adj.items() if v}, emitted, fp, classes, rep, keys)


def _built_at_once(ix: ServiceIndex) -> tuple[object, ...]:
    """The graph of the index's pages built from scratch, as an index without saved arrays
    opens (an independent reference for the mapped and replayed one)."""
    g = ScanGraph(ix.settings, ix.pages)
    slots = np.arange(ix.pages.n, dtype=np.int64)
    g.build(slots[g.eligible(slots)])
    adj, emitted, fp, classes, rep, keys = g.view()
    return ({u: v for u, v in adj.items() if v}, emitted, fp, classes, rep, keys)


# every: the graph is saved once this many pages were written since (1: after each batch,
# 40: some batches replayed on opening, 10**9: never, so opening builds it)
@pytest.mark.parametrize("every", [1, 40, 10**9])
@pytest.mark.parametrize(("seed", "max_bucket_pairs"), [(3, 1000), (4, 3), (5, 2)])
def test_the_graph_opened_is_the_one_the_batches_built(
    tmp_path, monkeypatch, seed, max_bucket_pairs, every
):
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", every)
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_SHARE", 10**9)
    # Small buckets (max_bucket_pairs 2 or 3) make chains in key order; repeated texts make
    # classes of several pages; removals and rewrites leave pages out of the graph.
    settings = Settings(max_bucket_pairs=max_bucket_pairs)
    texts = _texts(160, seed)
    with ServiceIndex(tmp_path / "s", settings) as ix:
        ix.apply([PageUpdate(f"http://x/{i}", text=t) for i, t in enumerate(texts[:100])])
        ix.apply([PageUpdate(f"http://y/{i}", text=texts[i]) for i in range(0, 100, 7)])
        ix.apply([PageUpdate(f"http://x/{i}", remove=True) for i in range(0, 100, 9)])
        ix.apply([PageUpdate(f"http://x/{i}", text=texts[i + 60]) for i in range(0, 40, 5)])
        ix.apply([PageUpdate(f"http://z/{i}", text=t) for i, t in enumerate(texts[100:])])
        built = _graph(ix)
        assert built == _built_at_once(ix)
        groups = {frozenset(m) for m in ix.groups.values() if m}
        saved = graph_name(read_manifest(tmp_path / "s"))
        assert (saved is None) == (every == 10**9)
        if saved is not None:  # one graph folder: the one the manifest names
            assert [p.name for p in (tmp_path / "s").glob(f"{GRAPH_PREFIX}*")] == [saved]
    with ServiceIndex(tmp_path / "s", read_only=True) as ix:
        assert _graph(ix) == built
        assert {frozenset(m) for m in ix.groups.values() if m} == groups
        adj, emitted, _, classes, *_ = built
        assert len(adj) > 10 and len(emitted) > len(adj) // 2
        assert any(len(m) > 1 for m in classes.values())
        assert ix.consistency_errors() == []
        # and the opened graph takes the next batch as the built one would
    with ServiceIndex(tmp_path / "s") as ix:
        ix.apply([PageUpdate(f"http://w/{i}", text=t) for i, t in enumerate(texts[:30])])
        after = _graph(ix)
    with ServiceIndex(tmp_path / "s", read_only=True) as ix:
        assert _graph(ix) == after == _built_at_once(ix)


KILL_SCRIPT = textwrap.dedent("""
    import sys
    import neardup.index.index_saves as index_saves_module
    from neardup.service import PageUpdate, ServiceError, ServiceIndex
    index_saves_module.GRAPH_EVERY_PAGES = 0  # this batch saves the graph's arrays
    ix = ServiceIndex(sys.argv[1])
    ix.apply([PageUpdate(f"http://k/{i}", text=t) for i, t in enumerate(sys.argv[2:])])
""")


@contextlib.contextmanager
def _paused_in_a_save(script: str, store, texts: list[str]):
    """`script` run on `store` and `texts` in a process of its own, held once a folder it
    saves is written and before the manifest naming it (`GRAPH_SLEEP_HOOK`), then killed
    (SIGKILL) when the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(store), *texts],
        env={**os.environ, GRAPH_SLEEP_HOOK: "60"},
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert TX_MARKER in proc.stdout.readline()
        yield
    finally:
        proc.kill()
        proc.wait()


def test_a_kill_after_the_graph_arrays_before_the_manifest_keeps_the_last_version(
    tmp_path, monkeypatch
):
    """kill -9 once a batch is committed and its graph's arrays are written, before the
    manifest naming them: the last committed version (the batch, with the older arrays)
    opens whole, its pages replayed into the older arrays, and the writer goes on."""
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 0)
    store = tmp_path / "s"
    texts = _texts(60, 7)
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate(f"http://x/{i}", text=t) for i, t in enumerate(texts[:40])])
    manifest = read_manifest(store)
    assert manifest is not None and graph_name(manifest) is not None
    with _paused_in_a_save(KILL_SCRIPT, store, texts[40:]):
        # the batch is committed, its graph folder complete on disk, named by no manifest
        during = read_manifest(store)
        assert during.version == manifest.version + 1
        assert graph_name(during) == graph_name(manifest)
        assert len(list(store.glob(f"{GRAPH_PREFIX}*[0-9]"))) == 2
    with ServiceIndex(store, read_only=True) as ix:
        assert ix.graph_tail > 0  # the batch's pages, replayed into the older arrays
        assert "http://k/0" in ix.pages
        before = _graph(ix)
        assert before == _built_at_once(ix)
        groups = {frozenset(m) for m in ix.groups.values() if m}
        assert ix.consistency_errors() == []
    with ServiceIndex(store) as ix:  # the writer clears the leftover and goes on
        assert [p.name for p in store.glob(f"{GRAPH_PREFIX}*")] == [graph_name(manifest)]
        assert _graph(ix) == before
        assert {frozenset(m) for m in ix.groups.values() if m} == groups
        ix.apply([PageUpdate(f"http://z/{i}", text=t) for i, t in enumerate(texts[:20])])
        after = _graph(ix)
        assert after == _built_at_once(ix) and after != before
    with ServiceIndex(store, read_only=True) as ix:
        assert _graph(ix) == after


CHANGES_KILL_SCRIPT = textwrap.dedent("""
    import sys
    import neardup.index.index_saves as index_saves_module
    from neardup.service import PageUpdate, ServiceIndex
    index_saves_module.CHANGES_AT_CLOSE_PAGES = 0  # closing writes the graph's changes
    with ServiceIndex(sys.argv[1]) as ix:
        ix.apply([PageUpdate(f"http://k/{i}", text=t) for i, t in enumerate(sys.argv[2:])])
""")


def test_a_kill_after_the_graph_changes_before_the_manifest_keeps_the_last_version(
    tmp_path, monkeypatch
):
    """kill -9 once a closing writer wrote the graph's changes since the save, before the
    manifest naming them: the last version opens whole (its rows replayed into the save),
    the next writer removes the leftover folder, and its own changes written at close
    open with nothing to replay, as the graph it held."""
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 0)
    store = tmp_path / "s"
    texts = _texts(60, 8)
    with ServiceIndex(store) as ix:  # saved after its batch
        ix.apply([PageUpdate(f"http://x/{i}", text=t) for i, t in enumerate(texts[:40])])
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 10**9)
    with _paused_in_a_save(CHANGES_KILL_SCRIPT, store, texts[40:]):
        during = read_manifest(store)
        assert "changes" not in during.meta and len(list(store.glob("changes-*"))) == 1
    with ServiceIndex(store, read_only=True) as ix:
        assert ix.replay_tail == ix.graph_tail > 0  # the batch, replayed into the save
        before = _graph(ix)
        assert before == _built_at_once(ix) and ix.consistency_errors() == []
    monkeypatch.setattr(index_saves_module, "CHANGES_AT_CLOSE_PAGES", 0)
    with ServiceIndex(store) as ix:
        assert not list(store.glob("changes-*"))  # the leftover removed
        assert _graph(ix) == before
        ix.apply([PageUpdate(f"http://z/{i}", text=t) for i, t in enumerate(texts[:9])])
        after = _graph(ix)
    assert [p.name for p in store.glob("changes-*")] == [
        read_manifest(store).meta["changes"]["name"]
    ]
    with ServiceIndex(store, read_only=True) as ix:
        assert ix.replay_tail == 0 < ix.graph_tail  # rows since the save, none replayed
        assert _graph(ix) == after == _built_at_once(ix)


def test_closing_the_writer_saves_the_graph_once_enough_pages_wait(tmp_path, monkeypatch):
    """Pages written since the saved arrays are replayed on opening; a writer that closes
    with more of them than `GRAPH_AT_CLOSE_PAGES` saves the arrays, and the next opening
    replays nothing."""
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 10**9)
    store = tmp_path / "s"
    texts = _texts(80, 9)
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate(f"http://x/{i}", text=t) for i, t in enumerate(texts[:40])])
    assert graph_name(read_manifest(store)) is None  # few pages: nothing saved at close
    with ServiceIndex(store, read_only=True) as ix:
        assert ix.graph_tail == 0 and ix.graph_meta is None  # built at once
    monkeypatch.setattr(index_saves_module, "GRAPH_AT_CLOSE_PAGES", 10)
    with ServiceIndex(store) as ix:  # opening saves (none was), the batch is replayed
        ix.apply([PageUpdate(f"http://y/{i}", text=t) for i, t in enumerate(texts[40:])])
        assert ix.graph_tail >= 40
        built = _graph(ix)
        version = ix.manifest.version
    manifest = read_manifest(store)
    assert manifest.version == version + 1 and manifest.meta["graph"]["version"] == version
    with ServiceIndex(store, read_only=True) as ix:
        assert ix.graph_tail == 0 and _graph(ix) == built == _built_at_once(ix)


def test_a_reader_whose_graph_folder_is_replaced_under_it_reads_the_newer_version(
    tmp_path, monkeypatch
):
    """A writer may save a new graph folder, commit, and delete the old folder between a
    reader's reading the manifest and mapping the arrays: the reader reads the manifest
    again and maps the new folder."""
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 0)
    store = tmp_path / "s"
    texts = _texts(40, 11)
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate(f"http://x/{i}", text=t) for i, t in enumerate(texts[:20])])
        old = graph_name(read_manifest(store))
        before = (store / "manifest.json").read_text()
        ix.apply([PageUpdate(f"http://y/{i}", text=t) for i, t in enumerate(texts[20:])])
        built = _graph(ix)
        new = graph_name(read_manifest(store))
        after = (store / "manifest.json").read_text()
    assert old != new and not (store / old).exists()
    (store / "manifest.json").write_text(before)  # what the reader read first
    real = opening_module.read_arrays
    names = []

    def writer_commits_first(store_, name, arrays, **kw):
        names.append(name)
        if len(names) == 1:  # the writer commits the new version before this mapping
            (store / "manifest.json").write_text(after)
        return real(store_, name, arrays, **kw)

    monkeypatch.setattr(opening_module, "read_arrays", writer_commits_first)
    with ServiceIndex(store, read_only=True) as ix:
        assert names == [old, new] and _graph(ix) == built


def _graph_only_save(ix: ServiceIndex) -> None:
    """Save the index as neardup did before it saved its pages (issue 27): the graph's
    arrays alone, every segment kept and named."""
    m = ix.manifest
    name = f"{GRAPH_PREFIX}{m.version + 1:08d}"
    write_arrays(ix.store, name, ix.scan_graph.arrays(band_save.band_writer()))
    meta = {**m.meta, "graph": {"name": name, "version": m.version}}
    commit(ix.store, Manifest(m.version + 1, m.segments, m.rows, meta))


def test_graph_arrays_missing_a_file_are_built_again(tmp_path, monkeypatch):
    """A graph folder (of the graph alone, as older neardups saved it) that the manifest
    names but that lacks one of its files (not arrays this neardup reads) is no error: the
    graph is built at once from the segments, and a writer saves it anew."""
    store = tmp_path / "s"
    texts = _texts(40, 12)
    with monkeypatch.context() as m:
        m.setattr(ServiceIndex, "_save_graph_now", lambda self: None)
        with ServiceIndex(store) as ix:
            ix.apply([PageUpdate(f"http://x/{i}", text=t) for i, t in enumerate(texts)])
            built = _graph(ix)
            _graph_only_save(ix)
    old = graph_name(read_manifest(store))
    (store / old / "adj_ptr.npy").unlink()
    with ServiceIndex(store, read_only=True) as ix:
        assert ix.graph_meta is None and _graph(ix) == built
    with ServiceIndex(store) as ix:
        assert _graph(ix) == built
        new = graph_name(read_manifest(store))
        assert new is not None and new != old and (store / new / "adj_ptr.npy").is_file()
    with ServiceIndex(store, read_only=True) as ix:
        assert ix.graph_meta["name"] == new and _graph(ix) == built


def test_a_saved_index_missing_a_file_is_a_clear_error(tmp_path, monkeypatch):
    """A save holds the pages of the segments it replaced: one missing a file cannot be
    rebuilt from them, so opening it says so, reader or writer, and writes nothing."""
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 0)
    store = tmp_path / "s"
    texts = _texts(40, 13)
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate(f"http://x/{i}", text=t) for i, t in enumerate(texts)])
    manifest = read_manifest(store)
    assert manifest.segments == [] and "pages" in manifest.meta["graph"]
    (store / graph_name(manifest) / "page_skeys.npy").unlink()
    for read_only in (True, False):
        with pytest.raises(ServiceError, match="lacks files"):
            ServiceIndex(store, read_only=read_only)
    assert read_manifest(store) == manifest
