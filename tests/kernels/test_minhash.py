"""Min-hash sketches: estimates against exact resemblance, batch vs single text, edge cases."""

from __future__ import annotations

import random

import numpy as np
import pytest

from neardup.config import Settings
from neardup.kernels import (
    EMPTY_VALUE,
    SIGNATURE_DTYPE,
    canonicalize,
    containment,
    estimate_resemblance,
    jaccard,
    minhash_packed,
    minhash_signature,
    shingle_hashes,
    sketch_batch,
    sketch_text,
)

VOCAB = [f"w{i}" for i in range(5000)]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(n))


def _shingle_set(text: str, s: Settings) -> np.ndarray:
    return np.unique(shingle_hashes(canonicalize(text), s.shingle_size, s.wrap_shingles, s.seed))


def test_jaccard_and_containment_by_hand() -> None:
    a = np.array([1, 2, 3, 4], dtype=np.uint64)
    b = np.array([3, 4, 5], dtype=np.uint64)
    assert jaccard(a, b) == pytest.approx(2 / 5)
    assert containment(a, b) == pytest.approx(2 / 4)
    assert containment(b, a) == pytest.approx(2 / 3)
    assert jaccard(a, a) == 1.0
    e = np.array([], dtype=np.uint64)
    assert jaccard(a, e) == 0.0 and jaccard(e, e) == 1.0 and containment(e, a) == 1.0
    big = np.array([2**63, 2**64 - 1], dtype=np.uint64)
    assert jaccard(big, np.array([2**64 - 1], dtype=np.uint64)) == pytest.approx(0.5)


def test_estimate_tracks_exact_resemblance() -> None:
    """Pairs of texts with a chosen share of edited words: estimates within 3 standard errors
    of the exact Jaccard of the shingle sets (at most one of 30 beyond 3, none beyond 4, as
    for a normal error), and the errors centred and of the size the binomial model
    predicts."""
    s = Settings(num_perm=256, seed=3)
    rng = random.Random(11)
    z = []
    for edit in [0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0] * 3:
        words = _text(rng, 600).split()
        other = [rng.choice(VOCAB) if rng.random() < edit else w for w in words]
        a, b = " ".join(words), " ".join(other)
        exact = jaccard(_shingle_set(a, s), _shingle_set(b, s))
        est = estimate_resemblance(sketch_text(a, s).minhash, sketch_text(b, s).minhash)
        se = max(np.sqrt(exact * (1 - exact) / s.num_perm), 1e-9)
        assert abs(est - exact) <= 4 * se + 1e-12, (edit, exact, est)
        if 0 < exact < 1:
            z.append((est - exact) / se)
        else:  # identical or disjoint sets: the estimate is exact
            assert est == exact
    z_arr = np.array(z)
    assert np.count_nonzero(np.abs(z_arr) > 3) <= 1
    assert abs(z_arr.mean()) < 3 / np.sqrt(z_arr.size)
    assert 0.5 < z_arr.std() < 1.5


def test_coordinates_are_independent() -> None:
    """Sets with known resemblance r: positions agree with probability r, and runs of 14
    positions (a super-shingle) all agree with probability r^14, as they do for independent
    functions."""
    rng = np.random.default_rng(0)
    r_true = 0.9
    n_pairs, k, union = 300, 84, 1000
    inter = round(r_true * union)
    agree, all14 = 0, 0
    for _ in range(n_pairs):
        u = np.unique(rng.integers(0, 2**64, size=union + 10, dtype=np.uint64))[:union]
        rng.shuffle(u)
        only = (union - inter) // 2
        a = u[: inter + only]
        b = np.concatenate([u[:inter], u[inter + only : inter + 2 * only]])
        r = inter / (inter + 2 * only)
        sa, sb = minhash_signature(a, 5, k), minhash_signature(b, 5, k)
        eq = sa == sb
        agree += int(eq.sum())
        all14 += int(eq.reshape(6, 14).all(axis=1).sum())
    p = agree / (n_pairs * k)
    assert abs(p - r) < 3 * np.sqrt(r * (1 - r) / (n_pairs * k))
    n_ss = n_pairs * 6
    q = r**14
    assert abs(all14 - n_ss * q) < 3.5 * np.sqrt(n_ss * q * (1 - q))


def test_identical_texts_identical_sketches() -> None:
    s = Settings.fetterly()
    rng = random.Random(1)
    t = _text(rng, 300)
    a, b = sketch_text(t, s), sketch_text(t, s)
    assert np.array_equal(a.minhash, b.minhash)
    assert np.array_equal(a.supershingles, b.supershingles)
    assert a.shingle_fp == b.shingle_fp and a.lexical_fp == b.lexical_fp
    # Lexically equivalent (same canonical text) -> same everything.
    c = sketch_text(t.upper().replace(" ", " ,; "), s)
    assert np.array_equal(a.minhash, c.minhash)
    assert a.lexical_fp == c.lexical_fp and a.shingle_fp == c.shingle_fp


def test_shingle_equivalent_but_not_lexically() -> None:
    # Same 1-shingle set, different order: shingle_fp equal, lexical_fp not.
    s = Settings(shingle_size=1)
    a, b = sketch_text("b a c a", s), sketch_text("a b c", s)
    assert a.shingle_fp == b.shingle_fp and a.lexical_fp != b.lexical_fp
    assert np.array_equal(a.minhash, b.minhash)


@pytest.mark.parametrize("settings", [Settings(), Settings.fetterly(), Settings(num_perm=37)])
def test_batch_equals_single_text(settings: Settings) -> None:
    rng = random.Random(2)
    texts = ["", "one", "Two words.", "a rose is a rose is a rose"]
    texts += [_text(rng, n) for n in [4, 5, 6, 50, 2000]]
    texts += [texts[-1], "x " * 100, "long" * 40 + " and short"]
    batch = sketch_batch([canonicalize(t) for t in texts], settings)
    assert len(batch) == len(texts)
    assert batch.minhash.dtype == SIGNATURE_DTYPE
    assert batch.minhash.shape == (len(texts), settings.num_perm)
    assert batch.n_tokens.dtype == batch.n_shingles.dtype == np.int32
    assert batch.lexical_fp.dtype == batch.shingle_fp.dtype == np.int64
    n_ss = settings.supershingle_count if settings.has_supershingles else 0
    assert batch.supershingles.shape == (len(texts), n_ss)
    for i, t in enumerate(texts):
        one = sketch_text(t, settings)
        assert np.array_equal(batch.minhash[i], one.minhash), i
        assert batch.n_shingles[i] == one.shingles.size
        assert batch.n_tokens[i] == one.n_tokens == len(canonicalize(t).split())
        assert batch.shingle_fp[i] == one.shingle_fp
        assert batch.lexical_fp[i] == one.lexical_fp
        assert np.array_equal(batch.supershingles[i], one.supershingles)


def test_empty_document() -> None:
    s = Settings()
    batch = sketch_batch(["", "a"], s)
    assert batch.n_shingles.tolist() == [0, 1]
    assert batch.n_tokens.tolist() == [0, 1]
    assert np.all(batch.minhash[0] == EMPTY_VALUE)
    assert not np.any(batch.minhash[1] == EMPTY_VALUE)


def test_seeds() -> None:
    t = "the quick brown fox jumps over the lazy dog " * 3
    a = sketch_text(t, Settings(seed=1))
    b = sketch_text(t, Settings(seed=1))
    c = sketch_text(t, Settings(seed=2))
    assert np.array_equal(a.minhash, b.minhash)
    assert np.count_nonzero(a.minhash == c.minhash) < 5
    assert a.shingle_fp != c.shingle_fp
    # Classic: function i depends only on (seed, i), so a shorter sketch is a prefix of a
    # longer one. The one-permutation sketch's bins depend on K, so it has no such prefix.
    classic = Settings(sketch="classic")
    longer = sketch_text(t, classic).minhash
    assert np.array_equal(sketch_text(t, classic.replace(num_perm=84)).minhash, longer[:84])
    assert not np.array_equal(sketch_text(t, Settings(num_perm=84)).minhash, a.minhash[:84])


def test_estimate_resemblance_vectorised() -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(0, 50, size=(7, 128)).astype(SIGNATURE_DTYPE)
    b = a.copy()
    b[:, :32] += 1
    out = estimate_resemblance(a, b)
    assert out.shape == (7,)
    assert np.allclose(out, 0.75)
    assert estimate_resemblance(a[0], a[0]) == 1.0
    assert isinstance(estimate_resemblance(a[0], b[0]), float)
    with pytest.raises(ValueError):
        estimate_resemblance(a, b[:, :64])


def _sketch_chunk(texts: list[str]) -> np.ndarray:
    return sketch_batch(texts, Settings.fetterly()).minhash


def test_same_result_in_other_processes() -> None:
    """Sketches do not depend on the process or on how a corpus is split into batches."""
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing import get_context

    rng = random.Random(9)
    texts = [canonicalize(_text(rng, n)) for n in range(1, 60)]
    whole = _sketch_chunk(texts)
    chunks = [texts[:7], texts[7:30], texts[30:]]
    with ProcessPoolExecutor(2, mp_context=get_context("spawn")) as pool:
        parts = list(pool.map(_sketch_chunk, chunks))
    assert np.array_equal(np.concatenate(parts), whole)


def test_minhash_packed_rows() -> None:
    rng = np.random.default_rng(3)
    sets = [rng.integers(0, 2**64, size=n, dtype=np.uint64) for n in [0, 1, 3, 4, 5, 100]]
    offsets = np.cumsum([0] + [s.size for s in sets])
    packed = minhash_packed(np.concatenate(sets), offsets, 4, 50)
    assert packed.shape == (6, 50)
    for row, s in zip(packed, sets, strict=True):
        assert np.array_equal(row, minhash_signature(s, 4, 50))
    assert np.all(packed[0] == EMPTY_VALUE)
    # A multiset gives the signature of its set.
    assert np.array_equal(minhash_signature(np.repeat(sets[4], 3), 4, 50), packed[4])


def test_fused_raw_text_path_equals_canonical_path() -> None:
    from neardup.kernels import sketch_texts

    rng = random.Random(4)
    raw = ["", "  ,; ", "Hello, <b>World</b>!", "ΟΔΟΣ İstanbul ünïcode"]
    raw += [_text(rng, n).upper().replace(" ", " -- ") for n in [3, 40, 700]]
    s = Settings.fetterly()
    fused = sketch_texts(raw, s)
    plain = sketch_batch([canonicalize(t) for t in raw], s)
    for field in ("n_tokens", "n_shingles", "lexical_fp", "shingle_fp", "minhash"):
        assert np.array_equal(getattr(fused, field), getattr(plain, field)), field
    assert np.array_equal(fused.supershingles, plain.supershingles)


def test_arrow_input_equals_python_strings() -> None:
    import pyarrow as pa

    from neardup.kernels import doc_shingle_counts, doc_shingle_counts_arrow, sketch_arrow

    rng = random.Random(8)
    raw = ["Hello, <b>World</b>!", None, "", "ΟΔΟΣ İstanbul ünïcode"]
    raw += [_text(rng, n) for n in [3, 40, 700]]
    s = Settings.fetterly()
    as_str = [t or "" for t in raw]
    expected = sketch_batch([canonicalize(t) for t in as_str], s)
    arrays = [
        pa.array(raw),
        pa.array(raw, type=pa.large_string()),
        pa.chunked_array([pa.array(raw[:3]), pa.array(raw[3:])]),
        pa.array(["skip me", *raw, "and me"]).slice(1, len(raw)),
    ]
    for arr in arrays:
        got = sketch_arrow(arr, s)
        for field in ("n_tokens", "n_shingles", "lexical_fp", "shingle_fp", "minhash"):
            assert np.array_equal(getattr(got, field), getattr(expected, field)), field
    hashes, counts = doc_shingle_counts_arrow(arrays[-1], s)
    ref_hashes, ref_counts = doc_shingle_counts([canonicalize(t) for t in as_str], s)
    assert np.array_equal(hashes, ref_hashes) and np.array_equal(counts, ref_counts)
    assert len(sketch_arrow(pa.array([], type=pa.string()), s)) == 0
