"""The page table (`service/pages.py`): URL -> slot through sorted page keys, columns by slot.

Checked against a plain dict of the same pages: URLs whose page keys collide (`url_key`
normalises a URL, so `x#a` and `x#b` share a key), pages added after opening and folded into
the sorted keys, columns grown past their capacity, and a reopened index."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import neardup.index.state.pages as pages_module
from neardup.index.state.page_urls import PageUrls
from neardup.index.state.pages import PageTable, SlotRows
from neardup.pipeline.steps.near_pairs import url_key
from neardup.service import PageUpdate, ServiceIndex


def test_colliding_keys_are_told_apart_by_the_url():
    assert url_key("http://a.example/x#1") == url_key("http://a.example/x#2")
    t = PageTable(8, 2)
    a, b = t.add("http://a.example/x#1"), t.add("http://a.example/x#2")
    a.links_in, b.links_in = 3, 5
    t.fold_if_due()
    t.fold()  # into the sorted keys, where the two share one key
    assert t["http://a.example/x#1"].links_in == 3
    assert t["http://a.example/x#2"].links_in == 5
    assert "http://a.example/x#3" not in t and t.get("http://a.example/x#3") is None
    assert "http://a.example/x" not in t


@pytest.mark.parametrize("seed", [0, 1])
def test_the_table_answers_as_a_dict(seed, monkeypatch):
    monkeypatch.setattr(pages_module, "FOLD_AT_LEAST", 4)
    rng = np.random.default_rng(seed)
    t = PageTable(4, 1)
    model: dict[str, dict[str, object]] = {}
    for step in range(3000):
        # few hosts and fragments: many URLs share a page key
        url = f"http://h{rng.integers(3)}.example/{rng.integers(400)}#{rng.integers(3)}"
        p = t.get(url)
        assert (p is None) == (url not in model)
        if p is None:
            p = t.add(url)
            model[url] = {"group_id": None, "links_in": 0, "removed": False, "sig": None}
        m = model[url]
        assert p.url == url
        assert (p.group_id, p.links_in, p.removed) == (m["group_id"], m["links_in"], m["removed"])
        sig = p.signature
        assert (sig is None and m["sig"] is None) or sig.tolist() == m["sig"]
        gid = int(rng.integers(-1, 50))
        p.group_id = None if gid < 0 else gid
        p.links_in = step
        p.removed = bool(rng.integers(2))
        new_sig = None if rng.integers(4) == 0 else rng.integers(0, 2**32, 4, dtype=np.uint32)
        t.set_signature(p.slot, new_sig, 7, None)
        m.update(
            group_id=p.group_id,
            links_in=step,
            removed=p.removed,
            sig=None if new_sig is None else new_sig.tolist(),
        )
        if step % 100 == 99:
            t.fold_if_due()
    assert t.cap > 1024 or len(t) <= 1024
    assert set(t) == set(model) and len(t) == len(model)
    for url, m in model.items():
        assert t[url].links_in == m["links_in"]
    live, _ = t.counts()
    assert live == sum(not m["removed"] for m in model.values())


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 40), st.integers(0, 40), st.integers(0, 20), st.booleans(), st.randoms())
def test_a_level_of_urls_taken_in_answers_as_a_dict(saved, level, added, fold, rnd):
    """The URLs an opening takes in as a level (`PageUrls.extend`: an Arrow chunk and its
    sorted keys), after saved ones and before pages added since, found as a plain dict
    finds them: keys collide (`#` fragments share one), some asked URLs were never stored."""
    names = [f"http://h{rnd.randrange(3)}.example/{i // 3}#{i % 3}" for i in range(200)]
    rnd.shuffle(names)
    urls = list(dict.fromkeys(names))[: saved + level + added]
    keys = np.array([url_key(u) for u in urls], np.int64)
    t = PageUrls(pa.array(urls[:saved], pa.string()))
    order = np.argsort(keys[:saved], kind="stable")
    t.skeys, t.sslots, t.skeys_saved = keys[:saved][order], order.astype(np.int64), True
    t.extend(pa.array(urls[saved : saved + level], pa.large_string()), keys[saved : saved + level])
    for slot in range(saved + level, len(urls)):
        t.append(urls[slot], slot)
    if fold:
        t.fold(keys)
        assert not t.level_keys.size
    model = {u: i for i, u in enumerate(urls)}
    asked = [*urls, "http://h0.example/99#9", "http://h1.example/0#7"]
    rnd.shuffle(asked)
    assert t.lookup(asked, [None] * len(asked)) == [model.get(u) for u in asked]
    assert [t.url_at(s) for s in range(len(urls))] == urls
    assert t.urls_at(np.arange(len(urls), dtype=np.int64)) == urls
    if not fold:  # what a save merges into its sorted keys: every slot's key, once
        got = np.concatenate([t.sslots, t.level_slots, np.arange(t.folded, len(urls))])
        assert sorted(got.tolist()) == list(range(len(urls)))
        assert np.all(t.level_keys[1:] >= t.level_keys[:-1])
        assert keys[t.level_slots].tolist() == t.level_keys.tolist()


def test_a_level_of_urls_goes_before_any_added_page():
    t = PageUrls()
    t.append("http://a.example/", 0)
    with pytest.raises(ValueError, match="before any added"):
        t.extend(pa.array(["http://b.example/"]), np.array([url_key("http://b.example/")]))


def test_pages_added_after_opening_are_found_once_folded(tmp_path, monkeypatch):
    monkeypatch.setattr(pages_module, "FOLD_AT_LEAST", 2)
    words = [f"w{i}" for i in range(300)]
    text = [" ".join(words[i : i + 60]) for i in range(0, 240, 3)]
    with ServiceIndex(tmp_path / "s") as ix:
        ix.apply([PageUpdate(f"http://a.example/{i}#x", text=s) for i, s in enumerate(text[:30])])
    with ServiceIndex(tmp_path / "s") as ix:
        for lo in range(30, 80, 10):  # more than an eighth new after each batch
            ix.apply(
                [PageUpdate(f"http://a.example/{i}#y", text=text[i]) for i in range(lo, lo + 10)]
            )
        ix.apply([PageUpdate(f"http://a.example/{i}#x", links_in=i) for i in range(30)])
        got = {u: ix.status(u) for u in ix.pages}
        # The writer folds nothing between batches (its next save merges them in)...
        assert len(got) == 80 and len(ix.pages._added) == 50
        ix.pages.fold()  # ... and a fold finds them all in the sorted keys
        assert not ix.pages._added and {u: ix.status(u) for u in ix.pages} == got
        assert [ix.pages[f"http://a.example/{i}#x"].links_in for i in range(30)] == list(range(30))
    with ServiceIndex(tmp_path / "s", read_only=True) as ix:
        assert {u: ix.status(u) for u in ix.pages} == got


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 300),
    st.lists(st.integers(1, 400), min_size=1, max_size=6),
    st.integers(0, 3),
    st.randoms(),
)
def test_slot_rows_in_blocks_read_as_one_matrix(base_rows, grows, parts, rnd):
    """Rows opened as one array, or (`parts` > 0) as the rows of several segments' matrices
    picked in some order with rows no slot reads between them (`store.Stacked`), then
    blocks added as slots are (small first blocks here), some slots redirected to other
    matrices (`redirect`, as opening puts the rows since a save in place): every read (a
    slot, a slice, many slots across blocks) and write is the plain matrix's."""
    from unittest import mock

    from neardup.index.state.arrays import Stacked

    base = np.arange(base_rows * 3, dtype=np.uint32).reshape(base_rows, 3)
    plain = base.copy()
    opened: np.ndarray | Stacked = base.copy()
    if parts:  # the base's rows scattered over `parts` matrices with dead rows among them
        total = base_rows + rnd.randrange(0, 50)
        where = np.array(rnd.sample(range(total), base_rows), np.int64)
        stacked = np.full((total, 3), 7, np.uint32)
        stacked[where] = base
        cuts = sorted(rnd.randrange(total + 1) for _ in range(parts - 1))
        opened = Stacked(np.split(stacked, cuts), where)
        assert np.array_equal(np.asarray(opened), base)
    with mock.patch.object(SlotRows, "_FIRST", 7):
        rows = SlotRows(3, np.uint32, opened)
        for need in grows:
            rows.reserve(rows.rows + need)
            plain = np.concatenate([plain, np.zeros((rows.rows - plain.shape[0], 3), np.uint32)])
            for _ in range(20):
                slot = rnd.randrange(rows.rows)
                value = rnd.randrange(2**32)
                rows[slot] = value
                plain[slot] = value
            # Many distinct slots written at once (`put`, as an opening writes the rows
            # since a save), across the opened rows and the blocks added since.
            many = rnd.sample(range(rows.rows), rnd.randrange(min(rows.rows, 60) + 1))
            many = np.array(many, np.int64)
            values = np.array([rnd.randrange(2**32) for _ in range(many.size * 3)], np.uint32)
            rows.put(many, values.reshape(-1, 3))
            plain[many] = values.reshape(-1, 3)
            if rnd.random() < 0.6:  # some slots read from another matrix from now on
                _redirect_some(rows, plain, rnd)
            assert rows.shape == plain.shape
            assert np.array_equal(rows[np.arange(rows.rows)], plain)
            picks = [rnd.randrange(rows.rows) for _ in range(rnd.randrange(0, 50))]
            assert np.array_equal(rows[picks], plain[picks])
            assert np.array_equal(rows[np.array(picks, np.int64)], plain[picks])
            lo = rnd.randrange(rows.rows)
            assert np.array_equal(rows[lo : lo + 5], plain[lo : lo + 5])
            assert np.array_equal(rows[lo], plain[lo])
    with pytest.raises(IndexError):
        rows[rows.rows]


def _redirect_some(rows, plain, rnd):
    """Redirect a random set of slots of `rows` (`SlotRows.redirect`) to a new matrix of
    their rows (some changed: `plain` takes them too), given as one array or as the rows of
    a `Stacked` scattered over parts with dead rows among them, as segments hold them."""
    from neardup.index.state.arrays import Stacked

    slots = np.array(rnd.sample(range(rows.rows), rnd.randrange(rows.rows + 1)), np.int64)
    fresh = np.array([rnd.randrange(2**32) for _ in range(slots.size * 3)], np.uint32)
    fresh = fresh.reshape(-1, 3)
    if rnd.random() < 0.5:
        target: np.ndarray | Stacked = fresh.copy()
    else:
        total = slots.size + rnd.randrange(0, 20)
        where = np.array(rnd.sample(range(total), slots.size), np.int64)
        spread = np.full((total, 3), 9, np.uint32)
        spread[where] = fresh
        cuts = sorted(rnd.randrange(total + 1) for _ in range(rnd.randrange(3)))
        target = Stacked(np.split(spread, cuts), where)
    rows.redirect(slots, target)
    plain[slots] = fresh


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 60), st.integers(0, 40), st.randoms())
def test_page_rows_in_any_order_open_as_in_slot_order(n, added, rnd):
    """A committed state's page rows come in segment order, not slot order (a page sent
    again has its newest row in a later segment): the URLs stay in the rows' order with the
    row of each slot. Every URL read (one slot, many, the iteration, a lookup by URL), before
    and after pages are added and folded in, is that of the rows put in slot order first."""
    import pyarrow as pa

    from neardup.index.files.store import PAGE_SCHEMA

    urls = [f"http://o.example/{i}#{rnd.randrange(3)}" for i in range(n)]
    keys = [url_key(u) for u in urls]
    rows = {name: [None] * n for name in PAGE_SCHEMA.names}
    rows.update(url=urls, page_key=keys, slot=list(range(n)), group_id=list(range(n)))
    ordered = pa.Table.from_pydict(rows, schema=PAGE_SCHEMA)
    shuffled = ordered.take(pa.array(rnd.sample(range(n), n)))
    sigs, lens = np.zeros((n, 4), np.uint32), np.zeros((n, 1), np.int32)
    tables = [PageTable.from_rows(t, sigs, lens, 4, 1) for t in (ordered, shuffled)]
    for t in tables:
        for i in range(added):
            t.add(f"http://o.example/new/{i}")
        if rnd.random() < 0.5:
            t.fold()
    want = urls + [f"http://o.example/new/{i}" for i in range(added)]
    picks = np.array([rnd.randrange(n + added) for _ in range(10)], np.int64)
    for t in tables:
        assert [t.url_at(s) for s in range(n + added)] == want
        assert list(t) == want
        assert t.urls_at(picks) == [want[s] for s in picks.tolist()]  # before a fold
        assert t.url_array(picks).to_pylist() == [want[s] for s in picks.tolist()]
        assert [t.slot(u) for u in want] == list(range(n + added))
        assert [t[u].group_id for u in urls] == list(range(n))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=4), st.integers(0, 60), st.randoms())
def test_slot_rows_over_saved_files_read_the_file_and_what_was_written(parts, grow, rnd):
    """A saved matrix's partitions as opened (`rows.file_map`: copy-on-write maps whose rows
    are read with `pread`), then blocks added: every read is the plain matrix's, the rows
    written since included (they are in the maps' private pages, not in the files), and
    the files are never changed."""
    import tempfile
    from pathlib import Path
    from unittest import mock

    from neardup.store.rows import FileMap, file_map

    with tempfile.TemporaryDirectory() as folder:
        plain = np.arange(sum(parts) * 3, dtype=np.uint32).reshape(-1, 3)
        files, lo = [], 0
        for i, size in enumerate(parts):
            path = Path(folder) / f"m.p{i:05d}.npy"
            np.save(path, plain[lo : lo + size])
            files.append(path)
            lo += size
        maps = [file_map(p, "c") for p in files]
        assert all(isinstance(m, FileMap) for m in maps)
        rows = SlotRows(3, np.uint32, maps)
        with mock.patch.object(SlotRows, "_FIRST", 7):  # small blocks added
            rows.reserve(rows.rows + grow)
        plain = np.concatenate([plain, np.zeros((rows.rows - plain.shape[0], 3), np.uint32)])
        saved = [np.load(p).copy() for p in files]
        for _ in range(4):
            if rows.rows:
                for _ in range(rnd.randrange(6)):  # one slot at a time, a row or a value
                    slot = rnd.randrange(rows.rows)
                    value = rnd.randrange(2**32)
                    rows[slot] = value
                    plain[slot] = value
                many = np.array(
                    rnd.sample(range(rows.rows), rnd.randrange(rows.rows + 1)), np.int64
                )
                values = np.array(
                    [rnd.randrange(2**32) for _ in range(many.size * 3)], np.uint32
                ).reshape(-1, 3)
                rows.put(many, values)
                plain[many] = values
            assert np.array_equal(rows[np.arange(rows.rows)], plain)
            picks = (
                [rnd.randrange(rows.rows) for _ in range(rnd.randrange(20))] if rows.rows else []
            )
            assert np.array_equal(rows[picks], plain[picks])
            for slot in picks:
                assert np.array_equal(rows[slot], plain[slot])
        for path, before in zip(files, saved, strict=True):
            assert np.array_equal(np.load(path), before)  # copy-on-write: the files as saved
        for path in files:  # a writer's next save removed the folder: read through the maps
            path.unlink()
        assert np.array_equal(rows[np.arange(rows.rows)], plain)
        for slot in range(sum(parts)):  # one at a time, in the saved files' blocks
            assert np.array_equal(rows[slot], plain[slot])
