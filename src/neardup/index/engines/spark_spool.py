"""What a Spark add's task sends back goes through files of bounded size, not through Spark.

Why: `SparkContext.runJob` hands the driver a task's results as one value. The JVM
gathers every record a task yields into one array (`PythonRDD.runJob`), serializes it as
the task's result and holds it whole in the driver's heap before the first record reaches
Python, which then held them all again. One task a file, a file's sketched batches
(about 0.75 KB a page) had to fit the driver's Java heap at once, with their copies: the
add of one 990,000-page JSONL file (2.6 GB) ran the default heap (1 GiB) out of memory
(issue 50). Now a task writes its records into pieces, files of at most `PIECE_BYTES`
(the record that crosses it included), in a spool folder of the index's, and sends back
only their names; the driver reads the pieces in order, one record at a time, and deletes
each once read. Reading costs the driver one record at a time (a batch of `batch` pages)
whatever the file's size, and the JVM passes a few hundred bytes a task.

The spool is in the index's folder because that is storage the driver and every executor
share already: the executors search the saved index there and write its band tables
(`engines/spark_jobs.py`). The records are pickles, not Parquet as the scan's executors write: a
record is the batch the driver applies (`PreparedBatch`: URLs to updates and sketches),
as the embedded engine's worker processes send it, written and read by one neardup in
one command and queried by no one; a Parquet schema for it would be a translation each
way for nothing. An add that ends, however it ends, removes its spool; one killed before
(its folder names its host and process) is removed by the next add on that host.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import socket
import uuid
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

# A piece's size at most, the record that crosses it included: the driver deletes a piece
# once read, so the disk a wave holds drains as the driver applies it.
PIECE_BYTES = 64 << 20
SPOOL_PREFIX = "spark-spool-"


@contextlib.contextmanager
def spool_folder(store: Path) -> Iterator[Path]:
    """A new spool folder in the index's folder `store`, removed on the way out (the add
    done, failed or stopped); first, the spools of adds of this host whose process is
    gone (killed before they could remove theirs)."""
    host = socket.gethostname()
    for old in store.glob(f"{SPOOL_PREFIX}{host}-*"):
        pid = old.name.removeprefix(f"{SPOOL_PREFIX}{host}-").split("-")[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(old, ignore_errors=True)
    folder = store / f"{SPOOL_PREFIX}{host}-{os.getpid()}-{uuid.uuid4().hex[:12]}"
    folder.mkdir()
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def write_pieces(records: Iterable[Any], folder: Path, bound: int) -> list[str]:
    """On an executor: `records` pickled into piece files in `folder` (new: a task
    attempt's own, so a retried or speculative attempt never writes into another's), a
    piece closed once it holds `bound` bytes or more; the pieces' names, in order."""
    folder.mkdir(parents=True)
    names: list[str] = []
    out = None
    try:
        for record in records:
            if out is None:
                names.append(f"piece-{len(names):06d}")
                out = open(folder / names[-1], "wb")  # noqa: SIM115 - closed below
            pickle.dump(record, out, protocol=pickle.HIGHEST_PROTOCOL)
            if out.tell() >= bound:
                out.close()
                out = None
    finally:
        if out is not None:
            out.close()
    return names


def read_pieces(folder: Path, names: list[str]) -> Iterator[Any]:
    """The records of the pieces `names` in `folder`, in order, one at a time; each piece
    deleted once read."""
    for name in names:
        path = folder / name
        with open(path, "rb") as f:
            while True:
                try:
                    record = pickle.load(f)
                except EOFError:
                    break
                yield record
        path.unlink()


def _alive(pid: int) -> bool:
    """Whether a process `pid` runs on this host (one of another user's counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
