"""An index opens from what it saved beside its graph (pages, groups, winners, as
copy-on-write maps) and the rows its segments hold since (issue 27: an opening reads what
batches wrote since the save, not every page; the segments a save holds are gone). Each
opening must be the index its batches built in memory, and the same as the opening of a
twin index that took the same batches and never saved (every segment read, the older path,
which reads no saved page): two readings of files that share no code past the segments."""

from __future__ import annotations

import mmap

import numpy as np
import pytest
from crawl_texts import near_copies

import neardup.index.files.saves as saves_module
import neardup.index.files.store as layout_module
import neardup.index.index_saves as index_saves_module
import neardup.index.opening as opening_module
from neardup.config import Settings
from neardup.index.files.manifest_meta import saved_at as _saved_at
from neardup.index.files.store import SEG_PREFIX, read_manifest, segment_version
from neardup.service import PageUpdate, ServiceIndex


def _texts(n: int, seed: int) -> list[str]:
    return near_copies(n, seed, vocab=500, words=100, bases=5, edits=6)


def _state(ix: ServiceIndex) -> tuple[object, ...]:
    """Every URL's status, the groups with their winners, every group id's winner, the
    counts."""
    status = {u: ix.status(u) for u in sorted(ix.pages)}
    groups = {frozenset(m): ix.winners.get(g) for g, m in ix.groups.items() if m}
    winners = {g: ix.winners.get(g) for g in range(1, ix.next_group)}  # deleted: None
    return status, groups, winners, ix.counts(), ix.pages.counts()


def _graph(ix: ServiceIndex) -> tuple[object, ...]:
    """The scan graph keyed by URL: edges, candidate counts, classes, band keys."""
    adj, emitted, fp, classes, rep, keys = ix.scan_graph.view()
    return ({u: v for u, v in adj.items() if v}, emitted, fp, classes, rep, keys)


def _batches(texts: list[str], rng: np.random.Generator) -> list[list[PageUpdate]]:
    """New pages, rewrites (some to a near copy of another page), removals, redirects,
    pages brought back, popularity: the cases a crawl's increments bring."""
    out: list[list[PageUpdate]] = []
    n = len(texts)
    live: list[int] = []
    for step in range(12):
        batch: dict[str, PageUpdate] = {}
        for i in rng.choice(n, 9, replace=False).tolist():
            batch[f"http://a.example/{i}"] = PageUpdate(f"http://a.example/{i}", text=texts[i])
            live.append(i)
        if live and step % 3 == 1:
            for i in rng.choice(live, 3).tolist():
                url = f"http://a.example/{i}"
                batch[url] = PageUpdate(url, remove=True)
        if live and step % 4 == 2:
            i, j = rng.choice(live, 2).tolist()
            url = f"http://a.example/{i}"
            batch[url] = PageUpdate(url, redirect_to=f"http://a.example/{j}")
        if live and step % 5 == 3:
            for i in rng.choice(live, 2).tolist():
                url = f"http://a.example/{i}"
                batch[url] = PageUpdate(url, text=texts[(i + 1) % n], links_in=int(i % 7))
        out.append(list(batch.values()))
    return out


@pytest.mark.parametrize(
    ("seed", "part_rows", "changes"),
    [(0, 1 << 16, False), (1, 1 << 16, True), (2, 16, True), (3, 7, False), (4, 16, True)],
)
def test_an_index_opened_from_its_save_is_the_one_its_batches_built(
    tmp_path, monkeypatch, seed, part_rows, changes
):
    # Saved after every 20 pages written (a save lands between batches, and an opening
    # replays the batches after it); segments merge as they always do. The sketches saved
    # in partitions of `part_rows` rows: one, or many, some linked from the save before.
    # With `changes`, a writer that closes (after every batch, saves every 30 pages) writes
    # the graph's changes since the save, and an opening takes them in and replays only
    # the rows after them.
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 30 if changes else 20)
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_SHARE", 10**9)
    monkeypatch.setattr(index_saves_module, "CHANGES_AT_CLOSE_PAGES", 0 if changes else 10**9)
    monkeypatch.setattr(saves_module, "PART_ROWS", part_rows)
    linked: list[str] = []
    real_link = layout_module.os.link

    def link(source, target):
        linked.append(str(target))
        real_link(source, target)

    monkeypatch.setattr(layout_module.os, "link", link)
    store = tmp_path / "s"
    texts = _texts(120, seed)
    rng = np.random.default_rng(seed)
    twin_store = tmp_path / "twin"  # the same batches, never saved
    saves = set()
    kept: dict[str, bool] = {}  # save -> whether it kept the band index's base
    tails: list[int] = []
    took: list[tuple[int, int]] = []  # (rows since the save, rows replayed) of openings
    settings = Settings(max_bucket_pairs=3)
    ix = ServiceIndex(store, settings)
    with monkeypatch.context() as m:
        m.setattr(ServiceIndex, "_save_graph_now", lambda self, write_tables=None: None)
        twin = ServiceIndex(twin_store, settings)
    try:
        for k, batch in enumerate(_batches(texts, rng)):
            if k % 3 == 2 or (changes and k):  # a new writer, opened from the save, goes on
                ix.close()
                ix = ServiceIndex(store)
            ix.apply(batch)
            built = _state(ix)
            graph = _graph(ix)
            manifest = read_manifest(store)
            if "graph" in manifest.meta:
                saves.add(manifest.meta["graph"]["name"])
                # A save kept the band index's base and wrote its changes beside it, or
                # folded them in (`BandBuckets.saved`).
                graph_folder = store / manifest.meta["graph"]["name"]
                kept[graph_folder.name] = (graph_folder / "delta_keys.npy").exists()
                # The save holds the rows of the segments before it: none is left.
                assert all(segment_version(s) > _saved_at(manifest) for s in manifest.segments)
            on_disk = sorted(p.name for p in store.iterdir() if p.name.startswith(SEG_PREFIX))
            assert on_disk == sorted(manifest.segments)
            written = sorted(p.name for p in store.iterdir() if p.name.startswith("changes-"))
            named = manifest.meta.get("changes")
            assert written == ([named["name"]] if named else [])  # stale ones removed
            with ServiceIndex(store, read_only=True) as saved:
                tails.append(saved.graph_tail)  # rows read from the segments
                took.append((saved.graph_tail, saved.replay_tail))
                assert _state(saved) == built
                assert _graph(saved) == graph
            # The twin's files read the older way: every segment's rows, nothing saved.
            with monkeypatch.context() as m:
                m.setattr(ServiceIndex, "_save_graph_now", lambda self, write_tables=None: None)
                twin.apply(batch)
                assert read_manifest(twin_store).meta.get("graph") is None
                with ServiceIndex(twin_store, read_only=True) as read_all:
                    assert _state(read_all) == built
                    assert _graph(read_all) == graph
    finally:
        ix.close()
        twin.close()
    assert len(saves) > 3 and any(tails) and not all(tails)  # saves and replays both
    assert set(kept.values()) == {True, False}, kept  # saves of both kinds
    # Openings that took the graph's changes in replayed fewer rows than were written.
    assert any(replayed < rows for rows, replayed in took) == changes
    parts = sorted((store / manifest.meta["graph"]["name"]).glob("page_sigs.p*.npy"))
    assert len(parts) == -(-(manifest.meta["graph"]["pages"] + 1024) // part_rows)
    if part_rows < 10:  # partitions of a save before, unchanged since, linked
        assert linked
    with ServiceIndex(store, read_only=True) as ix:
        assert ix.consistency_errors() == []


def test_a_saved_index_opens_without_reading_its_pages(tmp_path, monkeypatch):
    """The columns, sketches and URLs of the saved pages are the files' maps (written to
    only where a batch writes), and the segments saved before are not read at all."""
    store = tmp_path / "s"
    texts = _texts(60, 7)
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate(f"http://b.example/{i}", text=t) for i, t in enumerate(texts)])
    with ServiceIndex(store) as ix:  # the writer saved the pages on opening (none saved yet)
        assert "pages" in read_manifest(store).meta["graph"]
    read = []
    real = opening_module.read_committed

    def reads(*args, **kw):
        got = real(*args, **kw)
        read.append(got[1].pages.num_rows)
        return got

    monkeypatch.setattr(opening_module, "read_committed", reads)
    with ServiceIndex(store) as ix:
        assert read == [0]  # every page came from the save
        for column in (ix.pages.key, ix.pages.group, ix.scan_graph.node):
            assert _mapped(column)
        assert _mapped(ix.pages.sigs.blocks[0])
        ix.apply([PageUpdate("http://b.example/new", text=texts[3])])
        gid = ix.status("http://b.example/new").group_id
        assert "http://b.example/3" in ix.groups[gid]  # found in the saved pages' graph
        assert _mapped(ix.pages.key)  # the new page went into the room saved after them


def _mapped(a: np.ndarray) -> bool:
    base = a
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    return isinstance(base, mmap.mmap)
