"""Super-shingles and megashingles (Fetterly et al. 2004)."""

from __future__ import annotations

import random

import numpy as np
import pytest

from neardup.config import Settings
from neardup.kernels import (
    canonicalize,
    megashingle_pairs,
    megashingles,
    sketch_batch,
    supershingle_agreement,
    supershingle_probability,
    supershingles,
)


def _doc(rng: random.Random, n: int = 400) -> str:
    return " ".join(f"w{rng.randrange(10_000)}" for _ in range(n))


def test_identical_docs_agree_on_all_unrelated_on_none() -> None:
    s = Settings.fetterly()
    rng = random.Random(0)
    a, b = _doc(rng), _doc(rng)
    batch = sketch_batch([canonicalize(t) for t in [a, a, b]], s)
    ss = batch.supershingles
    assert ss.shape == (3, 6) and ss.dtype == np.int64
    assert supershingle_agreement(ss[0], ss[1]) == 6
    assert supershingle_agreement(ss[0], ss[2]) == 0
    assert supershingle_agreement(ss[[0, 0]], ss[[1, 2]]).tolist() == [6, 0]
    # Super-shingle j covers min-hash values j*14 .. j*14+13, nothing else.
    mh = batch.minhash.copy()
    mh[2, 14:28] = mh[0, 14:28]
    again = supershingles(mh, 6, 14, s.seed)
    assert (again[0] == again[2]).tolist() == [False, True, False, False, False, False]


def test_not_computed_when_the_sketch_is_too_short() -> None:
    s = Settings(num_perm=64)  # 6 x 14 = 84 values needed
    assert not s.has_supershingles
    assert sketch_batch(["a b c d e f"], s).supershingles.shape == (1, 0)


def test_megashingles_share_exactly_the_agreeing_pair() -> None:
    a = np.array([[11, 12, 13, 14, 15, 16]], dtype=np.int64)
    b = np.array([[11, 12, 93, 94, 95, 96]], dtype=np.int64)  # agree on 0 and 1 only
    ma, mb = megashingles(a), megashingles(b)
    assert ma.shape == (1, 15) and ma.dtype == np.int64
    shared = np.intersect1d(ma[0], mb[0])
    assert shared.size == 1
    col = int(np.flatnonzero(ma[0] == shared[0])[0])
    assert megashingle_pairs(6)[col] == (0, 1)
    assert ma[0, col] == mb[0, col]
    # Agreement on super-shingles 2 and 5 only: again one shared megashingle, another column.
    c = np.array([[71, 72, 13, 74, 75, 16]], dtype=np.int64)
    mc = megashingles(c)
    assert np.intersect1d(ma[0], mc[0]).size == 1
    assert megashingle_pairs(6)[int(np.flatnonzero(ma[0] == mc[0])[0])] == (2, 5)
    # One agreeing super-shingle is not enough.
    d = np.array([[11, 82, 83, 84, 85, 86]], dtype=np.int64)
    assert np.intersect1d(ma[0], megashingles(d)[0]).size == 0


def test_megashingle_tables_do_not_collide() -> None:
    # The same two values in different pair positions give different keys.
    a = np.array([[5, 5, 5, 5, 5, 5]], dtype=np.int64)
    assert np.unique(megashingles(a)).size == 15


def test_supershingle_probability_matches_fetterly() -> None:
    # "95% similar ... almost 90%"; "80% similar only have a 2.6% chance".
    assert supershingle_probability(0.95, 6, 14) == pytest.approx(0.8786, abs=1e-3)
    assert supershingle_probability(0.80, 6, 14) == pytest.approx(0.0258, abs=1e-3)
    p = supershingle_probability(np.array([0.0, 0.5, 1.0]), 6, 14, min_agree=6)
    assert p.tolist() == pytest.approx([0.0, 0.5**84, 1.0])
