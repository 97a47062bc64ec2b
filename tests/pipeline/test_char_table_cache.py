"""The character table kept on disk: equal to a fresh build, and never trusted when stale or
damaged (it is rebuilt and replaced instead)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from neardup import cache_folder
from neardup.kernels import chartable as ct
from neardup.pipeline import char_table_cache as cache


@pytest.fixture(scope="module")
def fresh() -> ct.Table:
    """A table built from `unicodedata` in this process, the reference for every test."""
    return ct.build_char_table()


@pytest.fixture
def no_table() -> Iterator[None]:
    """A process whose kernels hold no table yet; the process's table is put back after."""
    saved = list(ct._installed)
    ct._installed.clear()
    yield
    ct._installed[:] = saved


def _same(a: ct.Table, b: ct.Table) -> bool:
    return (
        np.array_equal(a.codes, b.codes)
        and np.array_equal(a.expansions, b.expansions)
        and a.max_out == b.max_out
    )


def _cached_file(directory: Path) -> Path:
    key = cache.table_key()
    assert key is not None
    return cache.table_path(directory, key)


def _no_build(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse() -> ct.Table:
        raise AssertionError("the table was built, not loaded")

    monkeypatch.setattr(ct, "build_char_table", refuse)


def test_cached_table_equals_a_fresh_build(
    tmp_path: Path, fresh: ct.Table, no_table: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache.prime_char_table(tmp_path)
    assert _cached_file(tmp_path).is_file()
    ct._installed.clear()
    _no_build(monkeypatch)  # the second process loads the file
    cache.prime_char_table(tmp_path)
    assert _same(ct.char_table(), fresh)


def test_a_process_holding_a_table_reads_nothing(tmp_path: Path, fresh: ct.Table) -> None:
    ct.char_table()
    cache.prime_char_table(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_cache_folder_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(cache_folder.CACHE_ENV, str(tmp_path / "c"))
    assert cache_folder.cache_dir() == tmp_path / "c"
    monkeypatch.delenv(cache_folder.CACHE_ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if os.name == "posix" and os.uname().sysname == "Linux":
        assert cache_folder.cache_dir() == tmp_path / "xdg" / "neardup"


@pytest.mark.parametrize(
    "damage",
    ["truncated", "garbage", "flipped", "empty"],
)
def test_a_damaged_file_is_rebuilt(
    tmp_path: Path, fresh: ct.Table, no_table: None, damage: str
) -> None:
    cache.prime_char_table(tmp_path)
    path = _cached_file(tmp_path)
    data = bytearray(path.read_bytes())
    if damage == "truncated":
        data = data[: len(data) // 2]
    elif damage == "garbage":
        data = bytearray(b"not a table" * 100)
    elif damage == "flipped":  # one code in the middle of the codes array
        data[len(data) // 3] ^= 0x01
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    assert cache.load_table(path, cache.table_key() or "") is None
    ct._installed.clear()
    cache.prime_char_table(tmp_path)
    assert _same(ct.char_table(), fresh)
    assert cache.load_table(path, cache.table_key() or "") is not None  # replaced by a good one


def test_a_table_of_another_key_is_not_trusted(
    tmp_path: Path, fresh: ct.Table, no_table: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file saved for another Unicode version (here: at the path of ours, with a wrong
    table in it) is rebuilt."""
    key = cache.table_key()
    assert key is not None
    codes = fresh.codes.copy()
    codes[ord("a")] = ord("b")
    wrong = ct.Table(codes, fresh.expansions.copy(), fresh.max_out)
    path = cache.table_path(tmp_path, key)
    assert cache.save_table(path, wrong, "another-unicode-version")
    assert cache.load_table(path, key) is None
    cache.prime_char_table(tmp_path)
    assert _same(ct.char_table(), fresh)


def test_key_follows_unicode_version_and_source(monkeypatch: pytest.MonkeyPatch) -> None:
    key = cache.table_key()
    monkeypatch.setattr(cache.unicodedata, "unidata_version", "0.0.0")
    assert cache.table_key() != key
    monkeypatch.undo()
    assert cache.table_key() == key
    monkeypatch.setattr(ct, "__file__", "/nonexistent/chartable.py")
    assert cache.table_key() is None  # an unreadable definition: nothing is cached


def test_unknown_definition_builds_in_memory(
    tmp_path: Path, fresh: ct.Table, no_table: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ct, "__file__", "/nonexistent/chartable.py")
    cache.prime_char_table(tmp_path)
    assert _same(ct.char_table(), fresh)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_folder_builds_in_memory(
    tmp_path: Path, fresh: ct.Table, no_table: None
) -> None:
    tmp_path.chmod(0o500)
    try:
        cache.prime_char_table(tmp_path / "sub")
        assert _same(ct.char_table(), fresh)
    finally:
        tmp_path.chmod(0o700)


def test_save_into_a_file_path_fails_softly(tmp_path: Path, fresh: ct.Table) -> None:
    """A cache 'folder' that is a file: nothing is written, nothing raised."""
    blocker = tmp_path / "file"
    blocker.write_text("x", encoding="utf-8")
    assert not cache.save_table(blocker / "t.npz", fresh, "k")


def test_write_leaves_no_temporary_files(tmp_path: Path, fresh: ct.Table) -> None:
    path = tmp_path / "t.npz"
    assert cache.save_table(path, fresh, "k")
    assert cache.save_table(path, fresh, "k")  # replacing an existing file
    assert [p.name for p in tmp_path.iterdir()] == ["t.npz"]
    loaded = cache.load_table(path, "k")
    assert loaded is not None and _same(loaded, fresh)
