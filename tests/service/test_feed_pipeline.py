"""`neardup add`'s pipeline around the index: an existing index opens in a thread while the
first batches are read and sketched, sketching moves to worker processes only once it has
taken a while in this one, and the command's process ends without Python's teardown. None
of these may change what is indexed: each is checked against the plain order (open first,
sketch in this process) on the same pages, and the quick end against the store it leaves.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from crawl_texts import near_copies
from run_groups import scan_groups

from neardup.index import feed as feed_module
from neardup.index.engines import embedded
from neardup.index.feed import add_files
from neardup.ingest.readers import InputError
from neardup.service import IndexBusy, ServiceIndex


def _jsonl(path: Path, texts: list[str], first: int = 0) -> Path:
    with open(path, "w", encoding="utf-8") as f:
        for i, text in enumerate(texts):
            f.write(json.dumps({"url": f"https://site.test/p{first + i}", "text": text}) + "\n")
    return path


@pytest.fixture(scope="module")
def crawl(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A base crawl and an increment of near copies of it (groups across the two)."""
    base = tmp_path_factory.mktemp("feed")
    texts = near_copies(160, 5, vocab=400, words=80, bases=4, edits=5)
    return _jsonl(base / "base.jsonl", texts[:120]), _jsonl(base / "inc.jsonl", texts[120:], 120)


def _state(store: Path) -> dict[str, Any]:
    with ServiceIndex(store, read_only=True) as ix:
        return {u: ix.status(u) for u in sorted(ix.pages)}


def _plain(store: Path, crawl: tuple[Path, Path]) -> dict[str, object]:
    """The base then the increment, the index opened before anything is read, sketched here."""
    add_files(store, [crawl[0]], batch=16, workers=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(feed_module, "_opened", _opened_first)
        add_files(store, [crawl[1]], batch=16, workers=1)
    return _state(store)


def _opened_first(store, settings, wait, engine):  # the order before the thread: open, read
    from concurrent.futures import Future
    from contextlib import contextmanager

    @contextmanager
    def opened():
        with ServiceIndex(store, settings, wait=wait) as ix:
            done: Future = Future()
            done.set_result(ix)
            yield done, ix.settings, ix.options
            ix.close(engine.write_tables)

    return opened()


def test_batches_sketched_while_a_slow_index_opens_are_applied_in_order(
    tmp_path, crawl, monkeypatch
):
    want = _plain(tmp_path / "plain", crawl)
    store = tmp_path / "ahead"
    add_files(store, [crawl[0]], batch=16, workers=1)
    sketched_before_open: list[int] = []
    calls = {"sketch": 0}
    real_prepare = embedded.prepare_batch

    def counting_prepare(*args, **kwargs):
        calls["sketch"] += 1
        return real_prepare(*args, **kwargs)

    class SlowIndex(ServiceIndex):
        def __init__(self, *args, **kwargs):
            time.sleep(1.0)  # the pages are read and sketched meanwhile
            sketched_before_open.append(calls["sketch"])
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(embedded, "prepare_batch", counting_prepare)
    monkeypatch.setattr(feed_module, "ServiceIndex", SlowIndex)
    monkeypatch.setattr(feed_module, "AHEAD_WHILE_OPENING", 2)
    totals = add_files(store, [crawl[1]], batch=16, workers=1)
    assert sketched_before_open and sketched_before_open[0] >= 1  # read ahead, bounded
    assert totals["new"] == 40
    assert _state(store) == want
    assert totals["duplicate_groups"] == sum(
        1
        for g in {s.group_id for s in want.values()}
        if sum(s.group_id == g for s in want.values()) >= 2
    )


def test_an_input_error_while_the_index_opens_releases_it(tmp_path, crawl):
    store = tmp_path / "s"
    add_files(store, [crawl[0]], batch=16, workers=1)
    before = _state(store)
    with pytest.raises(InputError, match=r"missing\.jsonl"):
        add_files(store, [tmp_path / "missing.jsonl"], batch=16, workers=1)
    ServiceIndex(store).close()  # not left locked by the thread that opened it
    assert _state(store) == before


def test_a_busy_index_is_refused_even_when_it_opens_beside_the_reading(tmp_path, crawl):
    store = tmp_path / "s"
    add_files(store, [crawl[0]], batch=16, workers=1)
    holder = ServiceIndex(store)
    try:
        with pytest.raises(IndexBusy):
            add_files(store, [crawl[1]], batch=16, workers=1)
    finally:
        holder.close()
    add_files(store, [crawl[1]], batch=16, workers=1)  # and then it goes in


def test_sketching_moves_to_worker_processes_only_after_a_while(tmp_path, crawl, monkeypatch):
    """A small input is sketched in this process (no pool started); with no time allowed
    inline the rest goes to two worker processes, with the same index at the end."""
    want = _plain(tmp_path / "plain", crawl)
    started: list[int] = []
    real_map = embedded.LocalEngine.map

    def spying_map(self, fn, tasks):
        started.append(self.workers)
        return real_map(self, fn, tasks)

    monkeypatch.setattr(embedded.LocalEngine, "map", spying_map)
    small = tmp_path / "small"
    add_files(small, [crawl[0]], batch=16, workers=2)
    add_files(small, [crawl[1]], batch=16, workers=2)
    assert started == [] and _state(small) == want
    monkeypatch.setattr(embedded, "INLINE_SKETCH_S", 0.0)
    pooled = tmp_path / "pooled"
    add_files(pooled, [crawl[0]], batch=16, workers=2)
    add_files(pooled, [crawl[1]], batch=16, workers=2)
    assert started == [2, 2] and _state(pooled) == want


def test_the_add_command_ends_at_once_with_its_report_whole(tmp_path, crawl):
    """The console command leaves without Python's teardown once its index is committed:
    the report is printed whole, the status is the command's, the store opens after."""
    store = tmp_path / "s"
    cmd = [sys.executable, "-m", "neardup.cli.main", "add", str(store)]
    done = subprocess.run([*cmd, str(crawl[0]), "--json"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["new_pages"] == 120 and report["index_pages"] == 120
    bad = subprocess.run([*cmd, str(tmp_path / "missing.jsonl")], capture_output=True, text=True)
    assert bad.returncode == 2 and "missing.jsonl" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert len(_state(store)) == 120


def test_reading_threads_do_not_outlive_the_command(tmp_path, crawl):
    before = {t.name for t in threading.enumerate()}
    store = tmp_path / "s"
    add_files(store, [crawl[0]], batch=16, workers=1)
    add_files(store, [crawl[1]], batch=16, workers=1)
    assert {t.name for t in threading.enumerate()} <= before


def test_pages_removed_leave_the_groups_a_scan_of_the_rest_finds(tmp_path, crawl):
    """`remove`: the index after removing pages has the groups of a scan of the pages left
    (an independent reference: the batch scan never saw the removed pages); a URL both
    removed and in the files stays; URLs it never held are counted and take no slot."""
    import neardup

    texts = [json.loads(line) for line in crawl[0].read_text().splitlines()]
    store = tmp_path / "s"
    add_files(store, [crawl[0]], batch=16, workers=1)
    before = _state(store)
    grouped = sorted(u for u, s in before.items() if s.is_duplicate)
    gone = grouped[::3]  # a third of the pages that have a duplicate
    back = texts[0]["url"]  # listed as gone, yet in the files added along
    again = _jsonl(tmp_path / "again.jsonl", [texts[0]["text"]])
    listed = [*gone, back, "https://never.test/x", gone[0]]
    with ServiceIndex(store, read_only=True) as ix:
        slots = len(ix.pages)
    totals = add_files(store, [again], batch=16, workers=1, remove=listed)
    held = set(gone) | {back}
    assert totals["removed"] == len(held)
    assert totals["remove_missing"] == 1  # the URL never held; the repeat counted once
    left = [t for t in texts if t["url"] not in set(gone)]
    rest = _jsonl(tmp_path / "rest.jsonl", [t["text"] for t in left])
    urls = {f"https://site.test/p{i}": t["url"] for i, t in enumerate(left)}
    run = neardup.scan([str(rest)], tmp_path / "run", workers=1)
    want = {frozenset(urls[u] for u in g) for g in scan_groups(run.path)}
    assert want, "groups remain: the comparison is not vacuous"
    with ServiceIndex(store, read_only=True) as ix:
        got = {frozenset(m) for m in ix.groups.values() if len(m) >= 2}
        assert len(ix.pages) == slots  # no slot for the URL never held
        assert ix.status(back).removed is False
        assert all(ix.status(u).removed for u in gone)
    assert got == want


def test_the_add_command_removes_the_urls_of_a_file(tmp_path, crawl):
    from typer.testing import CliRunner

    from neardup.cli.main import app

    store = tmp_path / "s"
    add_files(store, [crawl[0]], batch=16, workers=1)
    listing = tmp_path / "gone.txt"
    listing.write_text(
        "# pages the last crawl found gone\n\nhttps://site.test/p1\n  https://site.test/p2  \n"
        "https://elsewhere.test/never\n"
    )
    runner = CliRunner()
    res = runner.invoke(app, ["add", str(store), "--remove", str(listing), "--json"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert (report["removed_pages"], report["remove_missing"]) == (2, 1)
    assert report["index_pages"] == 118
    import gzip  # a list is read as a paths file is: gzip'd too

    packed = tmp_path / "gone.txt.gz"
    packed.write_bytes(gzip.compress(b"https://site.test/p3\n"))
    res = runner.invoke(app, ["add", str(store), "--remove", str(packed), "--json"])
    assert res.exit_code == 0 and json.loads(res.stdout)["removed_pages"] == 1
    res = runner.invoke(app, ["add", str(store), "--remove", str(tmp_path / "none.txt")])
    assert res.exit_code == 2 and "none.txt" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["add", str(store)])
    assert res.exit_code == 2 and "--remove" in " ".join(res.output.split())


_POOL_PROBE = """
import os, sys
import neardup.cli.main as m
from neardup.startup import PROBED_NOT_USED

def leave(code):
    import pyarrow as pa
    print("POOL", pa.default_memory_pool().backend_name, flush=True)
    probed = sorted(n for n in sys.modules if n.partition(".")[0] in PROBED_NOT_USED)
    print("PROBED", *probed, flush=True)
    os._exit(code)

m._leave_now = leave
sys.argv = ["neardup", "add", sys.argv[1], sys.argv[2], "--json"]
m.main()
"""


@pytest.mark.parametrize("chosen", [None, "mimalloc"])
def test_the_add_command_puts_arrow_on_the_c_allocator_unless_told(tmp_path, crawl, chosen):
    """`neardup add` runs Arrow on the C library's allocator (measured faster there), set
    before pyarrow loads; a pool the user chose with ARROW_DEFAULT_MEMORY_POOL stays."""
    import os

    env = {k: v for k, v in os.environ.items() if k != "ARROW_DEFAULT_MEMORY_POOL"}
    if chosen:
        env["ARROW_DEFAULT_MEMORY_POOL"] = chosen
    done = subprocess.run(
        [sys.executable, "-c", _POOL_PROBE, str(tmp_path / "s"), str(crawl[0])],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    assert f"POOL {chosen or 'system'}" in done.stdout


def test_the_add_command_goes_without_the_modules_its_libraries_only_probe_for(tmp_path, crawl):
    """`neardup add` runs without pandas and scipy, which pyarrow and numba import only to
    see whether they are there (a third of a small increment's time): a new index and an
    existing one (opened in a thread) are both written, and their pages are all there."""
    store = tmp_path / "s"
    for crawl_file in crawl:
        done = subprocess.run(
            [sys.executable, "-c", _POOL_PROBE, str(store), str(crawl_file)],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        probed = next(ln for ln in done.stdout.splitlines() if ln.startswith("PROBED"))
        assert probed.split() == ["PROBED"], probed
        report = json.loads(done.stdout[: done.stdout.index("POOL")])
        assert report["skipped"] == 0 and report["new_pages"] > 0, report
    with ServiceIndex(store, read_only=True) as ix:
        assert len(ix.pages) == report["index_pages"] > report["new_pages"]
