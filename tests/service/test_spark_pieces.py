"""A Spark add's tasks send their files' batches back in pieces of bounded size
(`service/spark_spool.py`), never as one value through Spark: one task's results as one
value ran the driver's default heap out of memory on one 990,000-page file (issue 50).

With the bound set small, a one-file add passes in several pieces, each read and deleted,
the JVM passing only their names, and the index has the embedded add's groups and every
page's status; the spool is gone after the add, and a killed add's is removed by the next."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

from index_states import index_state
from spark_session import spark  # noqa: F401 - the fixture

from neardup.index.engines.spark_spool import SPOOL_PREFIX, read_pieces, spool_folder, write_pieces
from neardup.index.feed import add_files


def test_pieces_close_at_the_bound_and_are_read_in_order_then_deleted(tmp_path):
    records = [("batch", bytes([i]) * 3000) for i in range(10)]
    names = write_pieces(iter(records), tmp_path / "attempt", bound=7000)
    sizes = [(tmp_path / "attempt" / n).stat().st_size for n in names]
    assert len(names) == 4  # three records a piece: the third crosses 7,000 bytes
    assert all(7000 <= s < 7000 + 3100 for s in sizes[:-1]) and sizes[-1] < 7000
    assert list(read_pieces(tmp_path / "attempt", names)) == records
    assert list((tmp_path / "attempt").iterdir()) == []
    assert write_pieces(iter([]), tmp_path / "none", bound=10) == []


def test_a_spool_is_removed_after_and_a_dead_adds_spool_by_the_next(tmp_path):
    import socket

    host = socket.gethostname()
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        check=True,
        capture_output=True,
        text=True,
    )
    dead = tmp_path / f"{SPOOL_PREFIX}{host}-{gone.stdout.strip()}-aaaa"
    living = tmp_path / f"{SPOOL_PREFIX}{host}-{os.getpid()}-bbbb"
    other = tmp_path / f"{SPOOL_PREFIX}elsewhere-1-cccc"  # another host's: not ours to judge
    for folder in (dead, living, other):
        folder.mkdir()
    with spool_folder(tmp_path) as spool:
        assert spool.is_dir() and not dead.exists() and living.is_dir() and other.is_dir()
    assert not spool.exists()


def test_one_files_batches_come_back_in_pieces_with_the_embedded_adds_groups(
    spark,  # noqa: F811 - the fixture
    tmp_path,
    monkeypatch,
):
    from neardup.index.engines import spark_jobs, spark_spool
    from neardup.synth.webtext import write_webtext

    pages = tmp_path / "pages.jsonl"
    write_webtext(pages, 3000, words=120, seed=5)
    bound = 200_000
    monkeypatch.setattr(spark_spool, "PIECE_BYTES", bound)
    pieces: list[list[int]] = []
    sent: list[bytes] = []
    real_read, real_run = spark_jobs.read_pieces, spark_jobs._run

    def read(folder, names):
        pieces.append([(folder / n).stat().st_size for n in names])
        yield from real_read(folder, names)

    def run(context, tasks, work, parts):
        got = real_run(context, tasks, work, parts)
        if getattr(work, "func", None) is spark_jobs._sketch_files:
            sent.extend(got)
        return got

    monkeypatch.setattr(spark_jobs, "read_pieces", read)
    monkeypatch.setattr(spark_jobs, "_run", run)
    store = tmp_path / "spark"
    totals = add_files(store, [pages], batch=250, engine="spark")
    plain = add_files(tmp_path / "embedded", [pages], batch=250, workers=1)

    assert len(pieces) == 1 and len(pieces[0]) >= 3, pieces  # one task, several pieces
    batch_bytes = max(pieces[0])  # every piece closed at the bound, one batch past it at most
    assert all(s >= bound for s in pieces[0][:-1]) and batch_bytes < 2 * bound
    assert len(sent) == 1 and len(sent[0]) < 500  # through Spark: the names alone
    _, names = pickle.loads(sent[0])
    assert len(names) == len(pieces[0])
    assert not list(store.glob(f"{SPOOL_PREFIX}*"))  # read, deleted, the spool removed
    for key in ("new", "pages", "groups", "duplicate_groups"):
        assert totals[key] == plain[key], key
    assert totals["duplicate_groups"] > 20  # the file's planted copies were found
    assert index_state(store) == index_state(tmp_path / "embedded")
