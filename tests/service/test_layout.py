"""The index on disk (`service/store.py`): segments and their merges, the conversion of an
old DuckDB index, one writer and many readers across processes."""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import sys
import textwrap
import threading
import time

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from crawl_texts import near_copies
from typer.testing import CliRunner

from neardup.cli.main import app as cli_app
from neardup.index.files.segments import merge_plan, read_state
from neardup.index.files.store import GRAPH_PREFIX, LEGACY_DB, MANIFEST, SEG_PREFIX, read_manifest
from neardup.service import IndexBusy, PageUpdate, ServiceError, ServiceIndex, open_index
from neardup.store.outputs import write_marker


def _texts(n: int, seed: int) -> list[str]:
    return near_copies(n, seed, vocab=500, words=100, bases=3, edits=6)


def _everything(ix: ServiceIndex) -> dict[str, object]:
    return {u: ix.status(u) for u in sorted(ix.pages)}


def test_merge_plan_is_tiered():
    assert merge_plan([100]) == 0
    assert merge_plan([100, 100, 100]) == 0
    assert merge_plan([100, 100, 100, 100]) == 4  # four of one class
    assert merge_plan([5000, 100, 100, 100]) == 0
    # Four small ones make one of the next class, which completes a run of four there.
    assert merge_plan([500, 500, 500, 100, 100, 100, 100]) == 7
    sizes: list[int] = []
    rewritten = 0
    for _ in range(1000):  # batches of one size: few segments, few rewrites per row
        sizes.append(10)
        k = merge_plan(sizes)
        if k:
            rewritten += sum(sizes[-k:])
            sizes[-k:] = [sum(sizes[-k:])]
        assert len(sizes) <= 3 * math.log(sum(sizes) / 10, 4) + 4
    assert rewritten <= 10_000 * (math.log(1000, 4) + 1)


def test_many_batches_reopen_to_the_same_state(tmp_path):
    store = tmp_path / "s"
    texts = _texts(90, 1)
    with ServiceIndex(store) as ix:
        for i in range(0, 90, 5):  # 18 small batches: segments written and merged
            ix.apply([PageUpdate(f"http://x/{j}", text=texts[j]) for j in range(i, i + 5)])
        ix.apply([PageUpdate(f"http://x/{j}", remove=True) for j in range(0, 90, 7)])
        ix.apply([PageUpdate("http://r/1", redirect_to="http://x/1")])
        ix.apply([PageUpdate(f"http://x/{j}", text=texts[j + 1]) for j in range(1, 30, 4)])
        want = _everything(ix)
        groups = {g: frozenset(m) for g, m in ix.groups.items() if m}
        manifest = read_manifest(store)
        assert manifest is not None and manifest.version > 20
        assert 1 <= len(manifest.segments) <= 8  # merged, not one folder per batch
        on_disk = sorted(p.name for p in store.iterdir() if p.name.startswith(SEG_PREFIX))
        assert on_disk == sorted(manifest.segments)  # merged inputs are gone
        assert ix.consistency_errors() == []
    with ServiceIndex(store, read_only=True) as ix:
        assert _everything(ix) == want
        assert {g: frozenset(m) for g, m in ix.groups.items() if m} == groups
    state = read_state(store, manifest)
    assert state.pages.num_rows == len(want)  # one row per page, the newest
    assert state.signatures.shape == (len(want), 128)


def _write_legacy(db, state, meta) -> None:
    """An index as neardup before issue 26 wrote it: one DuckDB file, signatures as blobs."""
    con = duckdb.connect(str(db))
    con.execute("CREATE TABLE settings (key VARCHAR, value VARCHAR)")
    con.executemany(
        "INSERT INTO settings VALUES (?, ?)",
        [
            ("settings", meta["settings"]),
            ("options", meta["options"]),
            ("next_group", str(meta["next_group"])),
        ],
    )
    p = state.pages
    has_sig = p.column("has_signature").to_pylist()
    sigs = [
        s.astype("<u4").tobytes() if has else None
        for s, has in zip(np.asarray(state.signatures), has_sig, strict=True)
    ]
    lens = [
        row.tolist() if has else None
        for row, has in zip(np.asarray(state.dim_lengths), has_sig, strict=True)
    ]
    rows = pa.table(
        {
            "url": p.column("url"),
            "doc_key": pa.array([0] * p.num_rows, pa.int64()),
            "group_id": p.column("group_id"),
            "length": p.column("length"),
            "signature": pa.array(sigs, pa.binary()),
            "exact_fp": p.column("exact_fp"),
            "redirect_to": p.column("redirect_to"),
            "links_in": p.column("links_in"),
            "verified": p.column("verified"),
            "updated_at": pa.nulls(p.num_rows, pa.timestamp("us")),
            "removed": p.column("removed"),
            "dim_lengths": pa.array(lens, pa.list_(pa.int32())),
            "shingle_fp": p.column("shingle_fp"),
            "n_tokens": p.column("n_tokens"),
        }
    )
    con.register("r", rows)
    con.execute("CREATE TABLE pages AS SELECT * FROM r")
    g = state.groups
    con.register("g", g)
    con.execute(
        "CREATE TABLE groups AS SELECT group_id, winner_url, NULL::BLOB AS winner_signature, "
        "size, failed, NULL::TIMESTAMP AS updated_at FROM g"
    )
    con.close()


def test_an_old_duckdb_index_is_converted_once(tmp_path, capfd):
    old = tmp_path / "new"
    texts = _texts(40, 2)
    with ServiceIndex(old) as ix:
        ix.apply([PageUpdate(f"http://x/{j}", text=t) for j, t in enumerate(texts)])
        ix.apply([PageUpdate("http://r/1", redirect_to="http://x/3")])
        ix.apply([PageUpdate("http://x/5", remove=True)])
        want = _everything(ix)
        manifest = read_manifest(old)
        assert manifest is not None
        state = read_state(old, manifest)
    store = tmp_path / "legacy"
    store.mkdir()
    write_marker(store, "service index")
    _write_legacy(store / LEGACY_DB, state, manifest.meta)
    with pytest.raises(ServiceError, match="convert"):
        ServiceIndex(store, read_only=True)
    capfd.readouterr()
    with ServiceIndex(store) as ix:
        assert "converting" in capfd.readouterr().err
        assert _everything(ix) == want and ix.consistency_errors() == []
        ix.apply([PageUpdate("http://x/100", text=texts[0])])  # and it goes on
        assert ix.status("http://x/100").group_id == want["http://x/0"].group_id
    assert (store / MANIFEST).is_file() and not (store / LEGACY_DB).exists()
    assert (store / f"{LEGACY_DB}.converted").is_file()
    with ServiceIndex(store) as ix:
        assert "converting" not in capfd.readouterr().err
        assert ix.status("http://x/7") == want["http://x/7"]


def test_one_writer_many_readers(tmp_path):
    store = tmp_path / "s"
    texts = _texts(30, 3)
    writer = ServiceIndex(store)
    try:
        writer.apply([PageUpdate(f"http://x/{j}", text=texts[j]) for j in range(20)])
        with pytest.raises(IndexBusy, match=f"PID {os.getpid()} ") as err:
            ServiceIndex(store)
        assert "\n" not in str(err.value)
        reader = open_index(store, read_only=True)
        seen = reader.counts().pages
        assert seen == 20 and "http://x/3" in reader
        with pytest.raises(ServiceError, match="read-only"):
            reader.add("http://x/99", text=texts[0])
        writer.apply([PageUpdate(f"http://x/{j}", text=texts[j]) for j in range(20, 30)])
        assert reader.counts().pages == 20  # its version, until it refreshes
        assert reader.refresh() and reader.counts().pages == 30
        assert not reader.refresh()
        assert reader.groups() == {g: frozenset(m) for g, m in writer.groups.items() if m}
        reader.close()
        got: list[ServiceIndex] = []
        waiter = threading.Thread(target=lambda: got.append(ServiceIndex(store, wait=True)))
        waiter.start()
        time.sleep(0.5)
        assert not got  # waiting for the writer
    finally:
        writer.close()
    waiter.join(30)
    assert got and got[0].counts().pages == 30
    got[0].close()


HOLD = textwrap.dedent("""
    import sys, time
    from neardup.service import PageUpdate, ServiceIndex
    ix = ServiceIndex(sys.argv[1])
    ix.apply([PageUpdate("http://held/1", text=" ".join(f"h{i}" for i in range(50)))])
    print("holding", flush=True)
    time.sleep(60)
""")


def test_cli_add_beside_a_writer_is_one_line_naming_it(tmp_path, demo_crawl):
    store = tmp_path / "s"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(store)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "holding"
        res = CliRunner().invoke(cli_app, ["add", str(store), *map(str, demo_crawl.warc_paths)])
        assert res.exit_code == 2, res.output
        assert res.exception is None or isinstance(res.exception, SystemExit)
        line = " ".join(res.output.split())
        assert f"PID {proc.pid}" in line and "--wait" in line and "Traceback" not in line
        serve = CliRunner().invoke(cli_app, ["serve", str(store), "--token", "t", "--port", "1"])
        assert serve.exit_code == 2 and f"PID {proc.pid}" in " ".join(serve.output.split())
        with ServiceIndex(store, read_only=True) as ix:  # readers go on meanwhile
            assert "http://held/1" in ix.pages
    finally:
        proc.kill()
        proc.wait()
    res = CliRunner().invoke(cli_app, ["add", str(store), *map(str, demo_crawl.warc_paths)])
    assert res.exit_code == 0, res.output  # the lock went with the killed process


def test_cli_add_wait_takes_the_store_when_the_writer_is_done(tmp_path, demo_crawl):
    store = tmp_path / "s"
    brief = HOLD.replace("time.sleep(60)", "time.sleep(2)")
    proc = subprocess.Popen(
        [sys.executable, "-c", brief, str(store)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout.readline().strip() == "holding"
        t0 = time.perf_counter()
        args = ["add", str(store), *map(str, demo_crawl.warc_paths), "--wait"]
        res = CliRunner().invoke(cli_app, args)
        assert res.exit_code == 0, res.output
        assert proc.poll() is not None  # it waited for the writer to end
        assert time.perf_counter() - t0 > 0.5
    finally:
        proc.kill()
        proc.wait()
    with ServiceIndex(store, read_only=True) as ix:  # both writers' pages
        assert "http://held/1" in ix.pages and len(ix.pages) > 10


def test_readers_open_while_a_writer_commits_and_merges(tmp_path):
    store = tmp_path / "s"
    texts = _texts(200, 4)
    writer = ServiceIndex(store)
    writer.apply([PageUpdate("http://x/0", text=texts[0])])
    done = threading.Event()
    failed: list[BaseException] = []

    def write() -> None:
        try:
            for i in range(1, 197, 4):  # 49 commits, several merges deleting their inputs
                writer.apply([PageUpdate(f"http://x/{j}", text=texts[j]) for j in range(i, i + 4)])
        except BaseException as err:
            failed.append(err)
        finally:
            done.set()

    thread = threading.Thread(target=write)
    thread.start()
    seen = []
    try:
        while not done.is_set():
            with ServiceIndex(store, read_only=True) as reader:
                n = len(reader.pages)
                assert n % 4 == 1  # whole batches only
                assert reader.consistency_errors() == []
                seen.append(n)
    finally:
        thread.join()
        writer.close()
    assert not failed and seen == sorted(seen) and len(seen) >= 2
    with ServiceIndex(store, read_only=True) as reader:
        assert len(reader.pages) == 197


def _three_batches(store) -> tuple[ServiceIndex, list[str]]:
    """A writer after three batches of five pages (no duplicates): the fourth makes four
    segments of one size, which it merges."""
    texts = [" ".join(f"u{j}w{i}" for i in range(60)) for j in range(20)]
    ix = ServiceIndex(store)
    for b in range(3):
        ix.apply([PageUpdate(f"http://x/{j}", text=texts[j]) for j in range(5 * b, 5 * b + 5)])
    return ix, texts


def _paused_merges(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """Merges that wait before writing: the first event is set when one has begun, and it
    goes on once the second is."""
    import neardup.index.merges as merges_module

    entered, go = threading.Event(), threading.Event()
    real = merges_module.write_merged

    def slow(*args, **kwargs):
        entered.set()
        assert go.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(merges_module, "write_merged", slow)
    return entered, go


def test_a_merge_runs_outside_the_index_lock(tmp_path, monkeypatch):
    store = tmp_path / "s"
    ix, texts = _three_batches(store)
    assert read_manifest(store).rows == [5, 5, 5]
    entered, go = _paused_merges(monkeypatch)
    fourth = threading.Thread(
        target=ix.apply, args=([PageUpdate(f"http://x/{j}", text=texts[j]) for j in range(15, 20)],)
    )
    fourth.start()
    try:
        assert entered.wait(30)  # the fourth batch is committed and its merge under way
        assert ix.lock.acquire(timeout=5)  # reads are not held up by the merge
        try:
            assert ix.status("http://x/17") is not None
        finally:
            ix.lock.release()
        with ServiceIndex(store, read_only=True) as reader:
            assert len(reader.pages) == 20
    finally:
        go.set()
        fourth.join(30)
    assert read_manifest(store).rows == [20] and ix.consistency_errors() == []
    ix.close()


def test_an_index_written_before_slots_gets_them_once(tmp_path, monkeypatch):
    """Segments without the `slot` and `version` columns (and no graph arrays), as neardup
    wrote them before the graph was saved: a reader opens them as they are (slots in row
    order, the graph built at once); the first writer saves them once as one segment with
    slots, and saves the graph; every opening answers alike."""
    store = tmp_path / "s"
    texts = _texts(60, 3)
    with monkeypatch.context() as m, ServiceIndex(store) as ix:
        m.setattr(ServiceIndex, "_save_graph_now", lambda self: None)  # every row in segments
        for i in range(0, 60, 6):  # ten batches: several segments, some merged
            ix.apply([PageUpdate(f"http://x/{j}", text=texts[j]) for j in range(i, i + 6)])
        ix.apply([PageUpdate(f"http://x/{j}", text=texts[j + 1]) for j in range(0, 30, 4)])
        ix.apply([PageUpdate("http://x/1", text=texts[50]), PageUpdate("http://y/1", text="a b")])
        want = _everything(ix)
        groups = {frozenset(m) for m in ix.groups.values() if m}
        graph = ix.scan_graph.view()
    manifest = read_manifest(store)
    assert len(manifest.segments) > 1
    for name in manifest.segments:  # as an older neardup wrote them
        path = store / name / "pages.parquet"
        pq.write_table(pq.read_table(path).drop_columns(["slot", "version"]), path)
    manifest.meta.pop("graph", None)
    (store / MANIFEST).write_text(manifest.to_json())
    for p in store.glob(f"{GRAPH_PREFIX}*"):
        shutil.rmtree(p)
    with ServiceIndex(store, read_only=True) as ix:
        assert _everything(ix) == want
        assert {frozenset(m) for m in ix.groups.values() if m} == groups
        assert ix.scan_graph.view() == graph
    assert read_manifest(store) == manifest  # a reader writes nothing
    with ServiceIndex(store) as ix:
        assert _everything(ix) == want and ix.scan_graph.view() == graph
    after = read_manifest(store)  # given slots, then saved: the save holds every row
    assert after.segments == [] and after.meta["graph"]["pages"] == len(want)
    with ServiceIndex(store, read_only=True) as ix:
        assert _everything(ix) == want
        assert {frozenset(m) for m in ix.groups.values() if m} == groups
        assert ix.scan_graph.view() == graph
    with ServiceIndex(store) as ix:  # and it goes on
        ix.apply([PageUpdate("http://x/new", text=texts[5])])
        assert ix.status("http://x/new").group_id == ix.status("http://x/5").group_id


def _segments(rng: np.random.Generator, with_slots: bool) -> list:
    """Four segments, oldest first, some pages and groups rewritten in several of them and
    some groups deleted (a null winner), as batches leave them."""
    from neardup.index.files.store import GROUP_SCHEMA, PAGE_SCHEMA, Segment

    segs = []
    for version in range(4):
        slots = np.sort(rng.choice(300, size=int(rng.integers(1, 120)), replace=False))
        n = slots.size
        columns = {f.name: pa.nulls(n, f.type) for f in PAGE_SCHEMA}
        columns["url"] = pa.array([f"https://h.test/p{s}" for s in slots])
        if with_slots:
            columns["slot"] = pa.array(slots, pa.int64())
        columns["version"] = pa.array(np.full(n, version), pa.int64())
        columns["group_id"] = pa.array(slots // 3, pa.int64())
        pages = pa.table(columns, schema=PAGE_SCHEMA)
        sigs = rng.integers(0, 2**32, size=(n, 4), dtype=np.uint32)
        lens = rng.integers(0, 99, size=(n, 2), dtype=np.int32)
        gids = np.unique(slots // 3)
        winners = [None if g % 5 == version else f"https://h.test/p{g * 3}" for g in gids]
        groups = pa.table(
            {
                "group_id": gids,
                "winner_url": winners,
                "size": np.full(gids.size, version, np.int32),
                "failed": np.zeros(gids.size, np.int32),
            },
            schema=GROUP_SCHEMA,
        )
        segs.append(Segment(pages, sigs, lens, groups))
    return segs


@pytest.mark.parametrize("seed", range(5))
def test_newest_row_of_a_page_by_slot_is_the_one_by_url(seed):
    """Segments stacked oldest first, a page rewritten in some of them: the newest row of
    each page found by its slot (one integer sort) is the one found by its URL, and the
    merged signatures are that row's."""
    from neardup.index.files.segments import merged

    segs = _segments(np.random.default_rng(seed), with_slots=True)
    got = merged(segs, drop_deleted=False)
    newest: dict[str, tuple[int, np.ndarray]] = {}
    for version, seg in enumerate(segs):
        for url, sig in zip(seg.pages.column("url").to_pylist(), seg.signatures, strict=True):
            newest[url] = (version, sig)
    urls = got.pages.column("url").to_pylist()
    assert sorted(urls) == sorted(newest)  # every page once
    assert got.pages.column("version").to_pylist() == [newest[u][0] for u in urls]
    assert np.array_equal(got.signatures, np.stack([newest[u][1] for u in urls]))


@pytest.mark.parametrize("with_slots", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_a_merge_written_block_by_block_is_the_segments_merged(
    tmp_path, monkeypatch, seed, with_slots
):
    """`write_merged` (page and group rows read back batch by batch, matrices from the
    files, a few rows at a time) writes what `merged` makes of the same segments in memory (itself
    checked against a plain newest-by-URL above), rows by slot or, for an older neardup's
    rows without one, by URL; deleted groups dropped or kept."""
    from neardup.index.files import segments as layout

    monkeypatch.setattr(layout, "_BLOCK", 7)
    monkeypatch.setattr(layout, "_MATRIX_BLOCK", 5)
    names = []
    for i, seg in enumerate(_segments(np.random.default_rng(seed), with_slots)):
        layout.write_segment(tmp_path, f"seg{i}", seg)
        names.append(f"seg{i}")
    for drop in (False, True):
        rows = layout.write_merged(tmp_path, f"merged-{drop}", names, drop)
        got = layout.read_segment(tmp_path, f"merged-{drop}")
        want = layout.merged([layout.read_segment(tmp_path, n) for n in names], drop)
        assert rows == got.pages.num_rows == want.pages.num_rows
        assert got.pages.equals(want.pages)
        assert np.array_equal(got.signatures, want.signatures)
        assert np.array_equal(got.dim_lengths, want.dim_lengths)
        assert got.groups.equals(want.groups)
        assert drop == (got.groups.column("winner_url").null_count == 0)
        urls = got.pages.column("url").to_pylist()
        assert len(urls) == len(set(urls))  # each page once


def test_arrays_written_in_blocks_read_back_as_written(tmp_path):
    """`RowBlocks` files are the `.npy` files of the whole arrays; a block of the wrong
    width or rows that do not add up to the shape are refused."""
    from neardup.index.files.saves import read_arrays, write_arrays
    from neardup.index.state.arrays import RowBlocks

    rng = np.random.default_rng(0)
    keys = rng.integers(-(2**62), 2**62, size=(3, 10), dtype=np.int64)
    slots = rng.integers(0, 99, size=(3, 10), dtype=np.int32)
    flat = np.arange(5, dtype=np.float32)
    blocks = RowBlocks(
        {"k": ((3, 10), np.int64), "s": ((3, 10), np.int32)},
        ((keys[t : t + 1], slots[t : t + 1]) for t in range(3)),
    )
    write_arrays(tmp_path, "g", [("flat", flat), blocks])
    got = read_arrays(tmp_path, "g", ("flat", "k", "s"))
    assert np.array_equal(got["k"], keys) and np.array_equal(got["s"], slots)
    assert np.array_equal(got["flat"], flat) and got["s"].dtype == np.int32
    short = RowBlocks({"k": ((3, 10), np.int64)}, ((keys[t : t + 1],) for t in range(2)))
    with pytest.raises(ValueError, match="2 rows written"):
        write_arrays(tmp_path, "h", [short])
    wide = RowBlocks({"k": ((3, 10), np.int64)}, iter([(np.zeros((1, 11), np.int64),)]))
    with pytest.raises(ValueError, match="a block of"):
        write_arrays(tmp_path, "i", [wide])


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_patched_rows_are_the_source_with_the_changed_rows_put_in(
    tmp_path, monkeypatch, kernel_copy
):
    """A `PatchedRows` file is the matrix a plain write of it gives: the source file's
    rows where unchanged, the changed and new rows from memory, zeros after; by the kernel's
    file-to-file copy or, where the file system has none, through the process."""
    import neardup.index.files.store as layout_module
    from neardup.index.files.saves import write_arrays
    from neardup.index.files.store import part_file
    from neardup.index.state.arrays import PatchedRows

    rng = np.random.default_rng(1)
    old = rng.integers(0, 2**32, size=(300, 7), dtype=np.uint32)  # 250 rows and room
    old[250:] = 0
    write_arrays(tmp_path, "a", [("m", old)])
    now = old[:260].copy()
    changed = np.array([0, 1, 2, 77, 78, 249, 252, 255], np.int64)  # runs, and the room's
    now[changed] = rng.integers(0, 2**32, size=(changed.size, 7), dtype=np.uint32)
    now[250:] = rng.integers(0, 2**32, size=(10, 7), dtype=np.uint32)  # new slots
    if not kernel_copy:

        def no_copy(*args):
            raise OSError("not here")

        monkeypatch.setattr(layout_module.os, "copy_file_range", no_copy)
    want = np.zeros((280, 7), np.uint32)
    want[:260] = now
    # A save in partitions of 40 rows of the same 250 rows (with room after them).
    write_arrays(
        tmp_path, "p", [PatchedRows("m", 300, 7, np.uint32, 250, lambda s: old[s], part_rows=40)]
    )
    for part_rows, source in ((1 << 16, "a"), (40, "a"), (64, "p"), (40, "p")):
        # From one file (an older save) or from partitions, into partitions of a size.
        patched = PatchedRows(
            "m",
            280,
            7,
            np.uint32,
            260,
            lambda slots: now[slots],
            tmp_path / source,
            250,
            changed,
            part_rows,
        )
        out = tmp_path / f"b{part_rows}{source}"
        write_arrays(tmp_path, out.name, [patched])
        parts = [part_file(out, "m", i) for i in range(-(-280 // part_rows))]
        assert sorted(out.iterdir()) == parts
        assert np.array_equal(np.concatenate([np.load(p) for p in parts]), want)
        if (part_rows, source) == (40, "p"):  # a partition no row of which changed: linked
            same = [
                p.stat().st_ino == part_file(tmp_path / "p", "m", i).stat().st_ino
                for i, p in enumerate(parts)
            ]
            assert same == [False, False, True, True, True, True, False]
    # Without a source every row comes from memory.
    whole = PatchedRows("m", 280, 7, np.uint32, 260, lambda slots: now[slots])
    write_arrays(tmp_path, "c", [whole])
    assert np.array_equal(np.load(part_file(tmp_path / "c", "m", 0)), want)


def test_a_save_takes_in_the_segments_a_merge_under_way_read(tmp_path, monkeypatch):
    """A save holds every committed row, so its version names no segment: a merge of
    segments the save took in meanwhile commits nothing and leaves no folder, and the
    index is whole."""
    store = tmp_path / "s"
    ix, texts = _three_batches(store)
    entered, go = _paused_merges(monkeypatch)
    batch = [PageUpdate(f"http://x/{j}", text=texts[j]) for j in range(15, 20)]
    failed: list[BaseException] = []

    def fourth_batch() -> None:
        try:
            ix.apply(batch)
        except BaseException as err:  # the batch's caller would see it
            failed.append(err)

    fourth = threading.Thread(target=fourth_batch)
    fourth.start()
    try:
        assert entered.wait(30)  # four segments committed, their merge under way
        ix._save_graph_now()
    finally:
        go.set()
        fourth.join(30)
    assert not failed
    manifest = read_manifest(store)
    assert manifest.segments == [] and manifest.meta["graph"]["pages"] == 20
    assert not [p for p in store.iterdir() if p.name.startswith(SEG_PREFIX)]
    want = _everything(ix)
    ix.close()
    with ServiceIndex(store, read_only=True) as reader:
        assert _everything(reader) == want and len(want) == 20
        assert reader.consistency_errors() == []


def test_the_format_an_index_was_written_in(tmp_path):
    """An index of format 2 (every row in a segment) opens and is written on as format 4
    (a save took its segments in); a format this neardup does not know is refused with one
    line, before anything is read or written."""
    store = tmp_path / "s"
    texts = _texts(12, 4)
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate(f"http://x/{j}", text=t) for j, t in enumerate(texts)])
        want = _everything(ix)
    raw = (store / MANIFEST).read_text()
    assert '"format": 4' in raw
    (store / MANIFEST).write_text(raw.replace('"format": 4', '"format": 2'))
    with ServiceIndex(store, read_only=True) as ix:
        assert _everything(ix) == want
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate("http://x/new", text=texts[0])])
    assert '"format": 4' in (store / MANIFEST).read_text()
    newer = (store / MANIFEST).read_text().replace('"format": 4', '"format": 5')
    (store / MANIFEST).write_text(newer)
    for read_only in (True, False):
        with pytest.raises(ServiceError, match=r"format 5.*newer neardup"):
            ServiceIndex(store, read_only=read_only)
    assert (store / MANIFEST).read_text() == newer
