"""Seeds, fingerprints and their int64 storage form."""

from __future__ import annotations

import numpy as np
import xxhash

from neardup.kernels import as_int64, fingerprint64
from neardup.kernels.hashing import derive_seeds, hash_row_segments


def test_fingerprint64_is_signed_xxh3() -> None:
    for data in [b"", b"abc", bytes(range(256)) * 10]:
        v = fingerprint64(data)
        assert -(2**63) <= v < 2**63
        assert v % 2**64 == xxhash.xxh3_64_intdigest(data)
    assert any(fingerprint64(bytes([i])) < 0 for i in range(64))


def test_as_int64_round_trips() -> None:
    u = np.array([0, 1, 2**63, 2**64 - 1], dtype=np.uint64)
    s = as_int64(u)
    assert s.dtype == np.int64
    assert s.tolist() == [0, 1, -(2**63), -1]
    assert np.array_equal(s.view(np.uint64), u)


def test_derive_seeds_stream() -> None:
    a = derive_seeds(1, 3, 200)
    assert a.dtype == np.uint64 and np.unique(a).size == 200
    assert np.array_equal(derive_seeds(1, 3, 50), a[:50])  # a prefix, whatever n
    assert not np.intersect1d(a, derive_seeds(2, 3, 200)).size
    assert not np.intersect1d(a, derive_seeds(1, 4, 200)).size
    assert np.array_equal(derive_seeds(-1, 3, 5), derive_seeds(2**64 - 1, 3, 5))


def test_row_segments_depend_on_order_and_seed() -> None:
    seeds = derive_seeds(0, 9, 2)
    v = np.array([[1, 2, 3, 4], [2, 1, 3, 4], [1, 2, 3, 4]], dtype=np.uint32)
    h = hash_row_segments(v, 2, 2, seeds)
    assert h[0, 0] != h[1, 0] and h[0, 1] == h[1, 1]
    assert np.array_equal(h[0], h[2])
    assert h[0, 0] != hash_row_segments(v, 2, 2, seeds[::-1])[0, 1]
