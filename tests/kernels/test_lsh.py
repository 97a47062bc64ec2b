"""LSH banding: band keys, the S-curve, the choice of (bands, rows), and the band index."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from neardup.config import Settings
from neardup.kernels import (
    SIGNATURE_DTYPE,
    BandTable,
    band_keys,
    candidate_probability,
    optimal_bands,
    recall_first_bands,
)


@pytest.mark.parametrize("threshold", [0.5, 0.7, 0.8, 0.9])
@pytest.mark.parametrize("num_perm", [84, 128, 256])
def test_s_curve_half_point_near_threshold(threshold: float, num_perm: int) -> None:
    b, r = optimal_bands(threshold, num_perm)
    assert b * r <= num_perm
    half = brentq(lambda s: candidate_probability(s, b, r) - 0.5, 1e-9, 1.0)
    assert abs(half - threshold) < 0.06, (b, r, half)


def test_weights_move_the_curve() -> None:
    fewer_fp = optimal_bands(0.8, 128, fp_weight=0.9, fn_weight=0.1)
    fewer_fn = optimal_bands(0.8, 128, fp_weight=0.1, fn_weight=0.9)

    def half(br: tuple[int, int]) -> float:
        return brentq(lambda s: candidate_probability(s, *br) - 0.5, 1e-9, 1.0)

    assert half(fewer_fp) > half(fewer_fn)


def test_candidate_probability() -> None:
    assert candidate_probability(1.0, 20, 5) == 1.0
    assert candidate_probability(0.0, 20, 5) == 0.0
    s = np.linspace(0, 1, 50)
    p = candidate_probability(s, 20, 5)
    assert np.all(np.diff(p) >= 0)
    assert candidate_probability(0.5, 1, 1) == pytest.approx(0.5)
    assert candidate_probability(0.5, 2, 1) == pytest.approx(0.75)


def test_band_keys() -> None:
    rng = np.random.default_rng(0)
    mh = rng.integers(0, 2**32, size=(4, 128), dtype=np.uint64).astype(SIGNATURE_DTYPE)
    mh[1] = mh[0]
    mh[2] = mh[0]
    mh[2, 0] ^= 1  # breaks band 0 only
    keys = band_keys(mh, 16, 8)
    assert keys.shape == (4, 16) and keys.dtype == np.int64
    assert np.array_equal(keys[0], keys[1])
    assert (keys[0] == keys[2]).tolist() == [False] + [True] * 15
    assert not np.any(keys[0] == keys[3])
    # Equal values in different bands give different keys.
    flat = np.zeros((1, 128), dtype=SIGNATURE_DTYPE)
    assert np.unique(band_keys(flat, 16, 8)).size == 16
    # Deterministic, and only the first bands*rows values count.
    assert np.array_equal(band_keys(mh, 16, 8), keys)
    assert np.array_equal(band_keys(mh[:, :120], 15, 8), keys[:, :15])
    with pytest.raises(ValueError):
        band_keys(mh, 17, 8)


def _s_curve(s: float, bands: int, rows: int) -> float:
    """The S-curve written out here, independently of the module under test."""
    return 1.0 - (1.0 - s**rows) ** bands


@pytest.mark.parametrize("threshold", [0.3, 0.5, 0.7, 0.8, 0.9, 0.95])
@pytest.mark.parametrize("num_perm", [16, 84, 128, 256])
@pytest.mark.parametrize("recall", [0.5, 0.9, 0.95, 0.99])
def test_recall_first_bands_is_the_longest_band_meeting_recall(
    threshold: float, num_perm: int, recall: float
) -> None:
    b, r = recall_first_bands(threshold, num_perm, recall)
    assert r >= 1 and b * r <= num_perm and b == num_perm // r
    # A pair at exactly the threshold is a candidate with probability >= recall ...
    assert _s_curve(threshold, b, r) >= recall, (b, r)
    # ... and no longer band (with as many bands as fit) would still catch it that often.
    for longer in range(r + 1, num_perm + 1):
        assert _s_curve(threshold, num_perm // longer, longer) < recall, (b, r, longer)


def test_recall_first_bands_documented_values() -> None:
    assert recall_first_bands(0.8, 128, 0.95) == (18, 7)  # README, the default scan
    s = Settings()
    assert recall_first_bands(s.threshold, s.num_perm, s.band_recall) == (18, 7)
    assert recall_first_bands(0.8, 128) == (18, 7)  # recall defaults to 0.95
    # When even single-row bands miss the recall, all K single-row bands are the best there is.
    assert _s_curve(0.01, 84, 1) < 0.95
    assert recall_first_bands(0.01, 84, 0.95) == (84, 1)
    # Recall first chooses shorter bands (more candidates at the threshold) than the
    # balanced tuning: 9 x 13 catches a pair at 0.8 less than half of the time.
    assert optimal_bands(0.8, 128) == (9, 13)
    assert _s_curve(0.8, 9, 13) < 0.5


def test_candidate_probability_scalar_is_the_plain_formula() -> None:
    # Exactly the Python-float formula for scalars (reports and the band choice rely on it).
    for s in (0.0, 0.37, 0.5, 0.8, 0.93, 1.0):
        for b, r in ((18, 7), (9, 13), (42, 3), (1, 1)):
            p = candidate_probability(s, b, r)
            assert isinstance(p, float) and p == _s_curve(s, b, r)
    grid = np.linspace(0.0, 1.0, 11)
    curve = candidate_probability(grid, 18, 7)
    assert isinstance(curve, np.ndarray)
    assert np.allclose(curve, [_s_curve(float(s), 18, 7) for s in grid], rtol=1e-12, atol=0)


def _brute_force_candidates(
    index_keys: list[list[int]], ids: list[int], query_keys: list[list[int]], cap: int | None
) -> list[tuple[int, int]]:
    """(query, id) pairs sharing a band key, per band only the first `cap` matching rows in
    input order, in plain Python."""
    found = set()
    for q, qrow in enumerate(query_keys):
        for band, key in enumerate(qrow):
            hits = [i for i, row in zip(ids, index_keys, strict=True) if row[band] == key]
            found.update((q, i) for i in hits[:cap])
    return sorted(found)


@pytest.mark.parametrize("cap", [None, 1, 3])
def test_band_table_matches_brute_force(cap: int | None) -> None:
    rng = np.random.default_rng(7)
    # Values from a tiny alphabet so that bands collide often: 6 bands of 2 rows, 1/16 each.
    sigs = rng.integers(0, 4, size=(150, 12)).astype(SIGNATURE_DTYPE)
    sigs[10:20] = sigs[10]  # a bucket larger than the cap in every band
    queries = rng.integers(0, 4, size=(40, 12)).astype(SIGNATURE_DTYPE)
    queries[0] = sigs[10]
    queries[1] = 1000 + np.arange(12)  # shares no band with anything
    ids = np.sort(rng.choice(10_000, size=150, replace=False)).astype(np.int32)[::-1].copy()
    keys = band_keys(sigs, 6, 2)
    qkeys = band_keys(queries, 6, 2)

    table = BandTable.build(keys.T, ids)
    assert table.keys.shape == table.ids.shape == (6, 150) and table.bands == 6
    for band in range(6):
        assert np.all(np.diff(table.keys[band]) >= 0)
        assert sorted(zip(table.keys[band].tolist(), table.ids[band].tolist(), strict=True)) == (
            sorted(zip(keys[:, band].tolist(), ids.tolist(), strict=True))
        )

    q, found = table.lookup(qkeys, cap)
    assert q.dtype == np.int64 and found.dtype == np.int64
    expected = _brute_force_candidates(keys.tolist(), ids.tolist(), qkeys.tolist(), cap)
    assert list(zip(q.tolist(), found.tolist(), strict=True)) == expected  # sorted, distinct
    assert len(expected) > 40  # the test data does collide
    assert 1 not in q.tolist()
    if cap is None:
        assert {i for qq, i in expected if qq == 0} >= set(ids[10:20].tolist())


def test_band_table_empty() -> None:
    empty = BandTable.build(np.empty((4, 0), np.int64), np.empty(0, np.int32))
    q, found = empty.lookup(np.zeros((3, 4), np.int64))
    assert q.size == found.size == 0 and q.dtype == found.dtype == np.int64
    table = BandTable.build(np.arange(8, dtype=np.int64).reshape(4, 2), np.array([5, 9]))
    q, found = table.lookup(np.empty((0, 4), np.int64))
    assert q.size == found.size == 0
    with pytest.raises(ValueError):
        table.lookup(np.zeros((2, 3), np.int64))
