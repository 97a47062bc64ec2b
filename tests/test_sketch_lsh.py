"""LSH banding: band keys, the S-curve, and the choice of (bands, rows)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import brentq

from neardup.kernels import SIGNATURE_DTYPE, band_keys, candidate_probability, optimal_bands


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
