"""The tokenizer's character table kept on disk, so a process loads it instead of building it.

`neardup.kernels.chartable.build_char_table` derives the table from Python's Unicode
database in about half a second of CPU; every process that canonicalizes text (the scan's
main process, each worker) would pay that again. The table depends only on the Unicode
database, the Python build and the code that defines it, so it is saved once under the user's
cache folder, keyed on all three, and loaded in milliseconds afterwards. Kernels do no file
I/O, so this layer reads the file and hands the table over (`install_char_table`).

A file is trusted only when it names the same key and its arrays hash to the digest it
carries; anything else (another Unicode version, an edited `chartable.py`, a truncated or
damaged file) is rebuilt and replaced. Files are written beside and renamed into place, so
concurrent scans never read a half-written one. Where no cache folder can be written the
table is built in memory, as before.
"""

from __future__ import annotations

import hashlib
import os
import platform
import sys
import tempfile
import unicodedata
import zipfile
from pathlib import Path

import numpy as np

from neardup import __version__
from neardup.cache_folder import cache_dir
from neardup.kernels import chartable
from neardup.kernels.chartable import Table

FORMAT = 1  # of the file below; bump on any change of its layout
_READ_ERRORS = (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile)


def table_key() -> str | None:
    """What the table is a function of: the Unicode database and Python build that
    `unicodedata` and `str` methods answer from, and the source of `chartable.py` (an
    editable checkout changes without a new version number). None when the source cannot
    be read, so nothing is cached against an unknown definition."""
    try:
        source = Path(chartable.__file__).read_bytes()
    except (OSError, TypeError):
        return None
    parts = (
        f"format {FORMAT}",
        f"neardup {__version__}",
        f"{platform.python_implementation()} {sys.version}",
        f"unicode {unicodedata.unidata_version}",
        f"maxunicode {sys.maxunicode}",
    )
    digest = hashlib.sha256("\n".join(parts).encode())
    digest.update(source)
    return digest.hexdigest()


def table_path(directory: Path, key: str) -> Path:
    """The file of the table with this key (one file per key, so versions side by side
    never overwrite each other's)."""
    return directory / f"chartable-{key[:24]}.npz"


def _digest(codes: np.ndarray, expansions: np.ndarray, max_out: int) -> np.ndarray:
    """sha256 of a table's content, as 32 bytes."""
    h = hashlib.sha256(np.ascontiguousarray(codes).tobytes())
    h.update(np.ascontiguousarray(expansions).tobytes())
    h.update(str(max_out).encode())
    return np.frombuffer(h.digest(), dtype=np.uint8)


def load_table(path: Path, key: str) -> Table | None:
    """The table saved at `path`, or None when it is missing, of another key, or damaged."""
    try:
        with np.load(path, allow_pickle=False) as saved:
            stored_key = saved["key"].tobytes().decode("ascii")
            codes = saved["codes"]
            expansions = saved["expansions"]
            max_out = int(saved["max_out"])
            digest = saved["digest"]
    except _READ_ERRORS:
        return None
    if stored_key != key or not np.array_equal(digest, _digest(codes, expansions, max_out)):
        return None
    return Table(codes, expansions, max_out)


def save_table(path: Path, table: Table, key: str) -> bool:
    """Write `table` to `path` beside and rename it into place; False when the folder
    cannot be written (the table is then simply not cached)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as out:
            np.savez(
                out,
                key=np.frombuffer(key.encode("ascii"), dtype=np.uint8),
                codes=table.codes,
                expansions=table.expansions,
                max_out=np.int64(table.max_out),
                digest=_digest(table.codes, table.expansions, table.max_out),
            )
        os.replace(tmp, path)
        return True
    except OSError:
        Path(tmp).unlink(missing_ok=True)
        return False


def prime_char_table(directory: Path | None = None) -> None:
    """Give this process's kernels their character table: nothing to do when they hold one,
    else the cached one (`directory`, by default `cache_dir()`), else a new one, which is
    then cached for the next process."""
    if chartable.has_char_table():
        return
    directory = directory if directory is not None else cache_dir()
    key = table_key()
    if directory is None or key is None:
        chartable.char_table()
        return
    path = table_path(directory, key)
    table = load_table(path, key)
    if table is None:
        table = chartable.build_char_table()
        save_table(path, table, key)
    chartable.install_char_table(table)
