"""`MappedRows` reads rows of a saved matrix with `pread` (slices and arrays of row numbers)
and through a map for any other index: every answer is what numpy's own indexing of the
loaded array gives (the reference), whatever the rows' order, repeats or signs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.store.rows import MappedRows

shapes = st.sampled_from([(0, 4), (1,), (7,), (37, 3), (200, 16)])
dtypes = st.sampled_from([np.uint32, np.int64, np.float32, np.int8])


@settings(max_examples=80, deadline=None)
@given(shapes, dtypes, st.data())
def test_rows_read_are_numpys_rows(tmp_path_factory, shape, dtype, data):
    path = tmp_path_factory.mktemp("rows") / "m.npy"
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1)))
    want = (rng.integers(-1000, 1000, size=shape)).astype(dtype)
    np.save(path, want)
    rows = MappedRows(path)
    assert rows.shape == want.shape and rows.dtype == want.dtype and len(rows) == shape[0]
    n = shape[0]
    if n:
        picked = data.draw(st.lists(st.integers(-n, n - 1), max_size=50))
        index = np.array(picked, np.int64)
        assert np.array_equal(rows[index], want[index])
        assert np.array_equal(rows[picked], want[picked])
        assert np.array_equal(rows[np.sort(index)], want[np.sort(index)])
        lo = data.draw(st.integers(-n, n))
        hi = data.draw(st.integers(-n, n + 3))
        assert np.array_equal(rows[lo:hi], want[lo:hi])
        assert np.array_equal(rows[lo:hi:2], want[lo:hi:2])
        assert np.array_equal(rows[picked[0] if picked else 0], want[picked[0] if picked else 0])
        mask = rng.random(n) < 0.5
        assert np.array_equal(rows[mask], want[mask])
        with pytest.raises(IndexError):
            rows[np.array([n], np.int64)]
    assert rows[np.empty(0, np.int64)].shape == (0, *shape[1:])


def test_a_matrix_shorter_than_its_header_is_an_error(tmp_path):
    path = tmp_path / "m.npy"
    np.save(path, np.arange(1000, dtype=np.int64).reshape(100, 10))
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size - 800)
    rows = MappedRows(path)
    assert np.array_equal(rows[np.array([0, 1])], np.arange(20).reshape(2, 10))
    with pytest.raises(OSError, match="shorter than its header"):
        rows[np.array([99])]


def _resident_kib(path) -> int:
    """This process's resident KiB of its maps of `path` (`/proc/self/smaps`)."""
    total, current = 0, None
    with open("/proc/self/smaps") as fh:
        for line in fh:
            parts = line.split()
            if "-" in parts[0] and len(parts) >= 5 and ":" in parts[3]:
                current = parts[5] if len(parts) > 5 else None
            elif parts[0] == "Rss:" and current == str(path):
                total += int(parts[1])
    return total


@pytest.mark.skipif(not Path("/proc/self/smaps").exists(), reason="reads /proc/self/smaps")
@pytest.mark.parametrize("mode", ["r", "c"])
def test_released_pages_leave_the_process_and_read_the_same(tmp_path, mode):
    """`release_pages` gives back what reads left resident of a map (read-only, or
    copy-on-write and never written); the values read after it are the file's."""
    from neardup.store.rows import release_pages

    values = np.arange(1 << 20, dtype=np.int64)  # 8 MiB
    path = tmp_path / "v.npy"
    np.save(path, values)
    mapped = np.load(path, mmap_mode=mode).view(np.ndarray)
    assert int(mapped[:: 4096 // 8].sum()) == int(values[::512].sum())  # a read a page
    assert _resident_kib(path) >= 4096  # (at least half of it)
    release_pages(mapped)
    assert _resident_kib(path) == 0
    assert np.array_equal(mapped, values)
    release_pages(values)  # no map: left alone
