"""The building blocks of the similarity methods, on cases computed by hand: chunk
fingerprints, the two iceberg joins, Broder's MIN_s / MOD_m estimates and super-shingles,
SimHash and its block tables."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.config import Settings, SettingsError
from neardup.kernels.broder import (
    min_s,
    min_s_compare,
    mod_m,
    mod_m_compare,
    sorted_sketch_supershingles,
)
from neardup.kernels.chunks import chunk_fingerprints
from neardup.kernels.hashing import mix64_scalar
from neardup.kernels.simhash import block_bounds, block_keys, hamming, simhash
from neardup.pipeline.steps.shared_pairs import shared_pairs

TEXT = "A b.\nc d\n\n  ---  \ne f! G h\ni j\n"  # 5 lines with words: a b | c d | e f g h | i j


def chunks(text: str, chunking: str) -> np.ndarray:
    return chunk_fingerprints(text, Settings(method="chunks", chunking=chunking))


@pytest.mark.parametrize(
    ("chunking", "expected"),
    [("lines4", 1), ("lines2", 2), ("paragraphs", 2), ("sentences", 5), ("document", 1)],
)
def test_chunk_counts_by_hand(chunking: str, expected: int) -> None:
    # lines: [a b] [c d] [e f g h] [i j] (the "---" line has no word): 4 lines -> one
    # 4-line chunk, two 2-line chunks; paragraphs [a b, c d] and [e f g h, i j];
    # sentences: "a b." | "c d" | "e f!" | "g h" | "i j".
    assert chunks(TEXT, chunking).size == expected


def test_chunks_ignore_formatting_inside_a_line_and_count_shared_chunks() -> None:
    lines = [f"line number {i} of the page" for i in range(12)]
    a = "\n".join(lines)
    b = "\n".join([*lines[:8], "LINE, number 8 -- of the page!", "something else", *lines[10:]])
    fa, fb = chunks(a, "lines2"), chunks(b, "lines2")
    assert fa.size == fb.size == 6
    # pairs (0,1) (2,3) (4,5) (6,7) (8,9) (10,11): only the fifth differs (line 9 replaced)
    assert np.intersect1d(fa, fb).size == 5
    assert np.intersect1d(chunks(a, "lines4"), chunks(b, "lines4")).size == 2


def test_iceberg_and_sort_joins_find_the_same_pairs() -> None:
    rng = np.random.default_rng(7)
    docs = rng.integers(0, 400, 30_000)
    feats = rng.integers(0, 6_000, 30_000)
    # plant 30 pairs sharing 12 extra features each
    for p in range(30):
        f = 10_000 + p * 100 + np.arange(12)
        docs = np.r_[docs, np.full(12, 2 * p), np.full(12, 2 * p + 1)]
        feats = np.r_[feats, f, f]
    t = 10
    sa, sb, ss, sort_stats = shared_pairs(feats, docs, t, max_df=50, join="sort")
    ia, ib, is_, ice = shared_pairs(feats, docs, t, max_df=50, join="iceberg", buckets=1 << 16)
    assert sa.size >= 30
    assert np.array_equal(sa, ia) and np.array_equal(sb, ib) and np.array_equal(ss, is_)
    assert ice.materialised_rows < sort_stats.materialised_rows == sort_stats.join_rows
    assert ice.false_positives == ice.candidates - sa.size
    # too few buckets: everything is heavy, many false positives, still the same answer
    ta, tb, _, tiny = shared_pairs(feats, docs, t, max_df=50, join="iceberg", buckets=4)
    assert np.array_equal(sa, ta) and np.array_equal(sb, tb) and tiny.false_positives > 0


def test_common_features_are_capped() -> None:
    docs = np.arange(100)
    feats = np.zeros(100, dtype=np.int64)  # one feature held by all 100 pages
    a, _, _, stats = shared_pairs(feats, docs, 1, max_df=50, join="sort")
    assert a.size == 0 and stats.common_features == 1 and stats.join_rows == 0


def test_min_s_resemblance_and_containment_by_hand() -> None:
    a = np.arange(1, 101, dtype=np.uint64)  # {1..100}
    b = np.arange(51, 151, dtype=np.uint64)  # {51..150}: r = 50/150, c = 50/100
    s = 1000  # larger than the sets: the sketch is the whole set, estimates are exact
    r, ca, cb = min_s_compare(min_s(a, s, 1), min_s(b, s, 1), 100, 100, s)
    assert (r, ca, cb) == pytest.approx((1 / 3, 0.5, 0.5))
    small = np.arange(1, 41, dtype=np.uint64)  # {1..40} inside {1..100}
    r, c_small, c_big = min_s_compare(min_s(small, s, 1), min_s(a, s, 1), 40, 100, s)
    assert (r, c_small, c_big) == pytest.approx((0.4, 1.0, 0.4))
    assert min_s(a, 10, 1).size == 10 and np.all(np.diff(min_s(a, 10, 1).astype(float)) > 0)


def test_min_s_estimate_is_close_with_a_small_sketch() -> None:
    a = np.arange(0, 4000, dtype=np.uint64)
    b = np.arange(1000, 5000, dtype=np.uint64)  # r = 3000 / 5000
    r, _, _ = min_s_compare(min_s(a, 400, 1), min_s(b, 400, 1), 4000, 4000, 400)
    assert r == pytest.approx(0.6, abs=0.08)


def test_mod_m_by_hand_and_the_2i_adjustment() -> None:
    a = np.arange(1, 101, dtype=np.uint64)
    small = np.arange(1, 41, dtype=np.uint64)
    sa, la = mod_m(a, 1, 10**6, 1)  # m = 1 keeps everything: exact values
    ss, ls = mod_m(small, 1, 10**6, 1)
    assert (sa.size, la, ss.size, ls) == (100, 0, 40, 0)
    assert mod_m_compare(ss, sa, ls, la) == pytest.approx((0.4, 1.0, 0.4))
    big = np.arange(0, 20_000, dtype=np.uint64)
    sketch, level = mod_m(big, 16, 300, 1)
    assert level > 4 and sketch.size <= 300  # 20000/16 = 1250 > 300: m doubled
    assert np.all(sketch % np.uint64(2**level) == 0)
    part, plevel = mod_m(big[:5_000], 16, 300, 1)
    assert plevel < level
    r, c_part, c_big = mod_m_compare(part, sketch, plevel, level)
    assert c_part == pytest.approx(1.0) and r == pytest.approx(0.25, abs=0.1)
    assert c_big == pytest.approx(r)


def test_broder_supershingles_of_a_sorted_sketch() -> None:
    values = np.array([1, 2, 3, 4, 5, 7, 8], dtype=np.uint64)
    flat, offsets = sorted_sketch_supershingles(values, np.array([0, 5, 7]), 4, 1)
    assert offsets.tolist() == [0, 2, 3]  # 5 values -> 2 windows of 4; 2 values -> one
    again, _ = sorted_sketch_supershingles(
        np.array([9, 2, 3, 4, 5], dtype=np.uint64), np.array([0, 5]), 4, 1
    )
    assert flat[1] == again[1] and flat[0] != again[0]  # [2,3,4,5] shared, [1,2,3,4] not


def test_simhash_and_hamming_by_hand() -> None:
    assert hamming(0b1011, 0b0001) == 2
    assert hamming(0, -1) == 64
    assert hamming(np.array([1, 3]), np.array([1, 0])).tolist() == [0, 2]
    # one shingle: every bit gets one vote, so the SimHash is that shingle's mixed value
    from neardup.kernels.hashing import derive_seed
    from neardup.kernels.simhash import TAG_SIMHASH

    x = 12345
    expected = int(mix64_scalar(x ^ int(derive_seed(1, TAG_SIMHASH))))
    assert simhash(np.array([x], dtype=np.uint64), 1) == np.int64(np.uint64(expected))
    assert simhash(np.empty(0, dtype=np.uint64), 1) == 0
    same = np.arange(100, dtype=np.uint64)
    assert simhash(same, 1) == simhash(same[::-1].copy(), 1)


def test_block_tables_catch_every_pair_within_k_bits() -> None:
    assert block_bounds(3) == [(0, 16), (16, 32), (32, 48), (48, 64)]
    rng = np.random.default_rng(1)
    base = rng.integers(-(2**63), 2**63 - 1, 200, dtype=np.int64)
    flips = [sum(1 << int(b) for b in rng.choice(64, 3, replace=False)) for _ in range(200)]
    other = base ^ np.array(flips, dtype=np.uint64).view(np.int64)
    assert np.all(hamming(base, other) == 3)
    kb, ko = block_keys(base, 3), block_keys(other, 3)
    assert np.all((kb == ko).any(axis=1))  # pigeonhole: one of 4 blocks agrees


def test_method_settings_are_validated() -> None:
    with pytest.raises(SettingsError):
        Settings(method="nope")
    with pytest.raises(SettingsError):
        Settings(method="chunks", chunking="lines3")
    with pytest.raises(SettingsError):
        Settings(method="minhash", containment=0.8)  # containment needs a Broder sketch
    with pytest.raises(SettingsError):
        Settings(method="broder-mod", mod_m=12)
    with pytest.raises(SettingsError):
        Settings(iceberg_buckets=1000)
    s = Settings(method="chunks", chunking="lines2")
    assert s.chunk_min_shared == 25 and s.replace(chunk_threshold=3).chunk_min_shared == 3
    assert Settings.from_json(s.to_json()) == s
