"""One-permutation hashing with optimal densification (`kernels.oph`), the default sketch:
its estimates against exact Jaccard computed on plain Python sets, its edge cases, and the
classic sketch, which must stay bit-identical to the one every earlier run stored."""

from __future__ import annotations

import hashlib
import random

import numpy as np
import pytest

from neardup import config
from neardup.config import Settings
from neardup.errors import SettingsError
from neardup.kernels import (
    EMPTY_VALUE,
    canonicalize,
    minhash_packed,
    sketch_batch,
    sketch_text,
    sketch_texts,
)
from neardup.kernels.minhash import SKETCHES
from neardup.kernels.oph import oph_packed

VOCAB = [f"w{i}" for i in range(400)]  # lower-case ASCII words: canonical text is the text
W = 5


def python_jaccard(a: list[str], b: list[str]) -> float:
    """Exact r(A, B) of the 5-word shingle sets, with Python sets of word tuples (a text
    shorter than 5 words is one shingle, as in neardup)."""

    def shingles(words: list[str]) -> set[tuple[str, ...]]:
        if len(words) < W:
            return {tuple(words)}
        return {tuple(words[i : i + W]) for i in range(len(words) - W + 1)}

    sa, sb = shingles(a), shingles(b)
    return len(sa & sb) / len(sa | sb)


def _edited(rng: random.Random, words: list[str], share: float) -> list[str]:
    return [rng.choice(VOCAB) if rng.random() < share else w for w in words]


def test_oph_is_the_default_and_classic_stays_available() -> None:
    assert Settings().sketch == "oph"
    assert Settings.fetterly().sketch == "classic"
    # the super-shingle method's test needs independent positions: classic unless asked
    assert Settings(method="supershingles").sketch == "classic"
    assert Settings(method="supershingles", sketch="oph").sketch == "oph"
    assert Settings.from_json(Settings(method="supershingles").to_json()).sketch == "classic"
    assert Settings(sketch="classic").sketch == "classic"
    with pytest.raises(SettingsError):
        Settings(sketch="bbit")
    # the settings keep their own copy of the names (loading them loads no kernel)
    assert config.SKETCHES == SKETCHES
    assert "sketch" in config.SKETCH_KEYS


def test_settings_written_before_the_option_load_as_classic() -> None:
    """A settings.json from before `sketch` existed describes classic sketches: reading it
    must not silently switch the run or index to the new default."""
    old = Settings().to_dict()
    del old["sketch"]
    assert Settings.from_dict(old).sketch == "classic"
    assert Settings.from_json(Settings().to_json()).sketch == "oph"
    with pytest.raises(SettingsError, match="sketch"):
        Settings.from_dict(old).check_compatible(Settings())


def test_estimates_are_unbiased_against_python_jaccard() -> None:
    """Many pairs, short pages (densified bins) to long ones (no empty bin), across the
    range of resemblance: each estimate within 4.5 binomial standard errors of the exact
    Jaccard (OPH's variance is at most a little above the binomial one), and the errors
    centred on zero: their mean within 3 standard errors of the mean."""
    s = Settings(num_perm=128, seed=7)
    assert s.sketch == "oph"
    rng = random.Random(16)
    errors, z = [], []
    for length in [8, 20, 40, 80, 150, 400, 1200] * 6:
        for share in (0.0, 0.02, 0.05, 0.1, 0.3, 0.6):
            a = [rng.choice(VOCAB) for _ in range(length)]
            b = _edited(rng, a, share)
            exact = python_jaccard(a, b)
            sa = sketch_text(" ".join(a), s).minhash
            sb = sketch_text(" ".join(b), s).minhash
            est = float(np.mean(sa == sb))
            se = np.sqrt(max(exact * (1 - exact), 1 / s.num_perm) / s.num_perm)
            assert abs(est - exact) <= 4.5 * se + 1 / s.num_perm, (length, share, exact, est)
            if exact == 1.0:
                assert est == 1.0  # the same set gives the same sketch
            else:
                errors.append(est - exact)
                z.append((est - exact) / se)
    err = np.array(errors)
    assert abs(err.mean()) <= 3 * err.std() / np.sqrt(err.size), err.mean()
    assert 0.5 < np.array(z).std() < 1.5


def test_densified_positions_are_unbiased_too() -> None:
    """Sets far smaller than K, where most positions are copied from other bins: the share
    of agreeing positions, pooled over many pairs, is the pooled exact Jaccard (plain Python
    sets of random 64-bit values), within 3.5 standard errors of the pool."""
    rng = np.random.default_rng(3)
    k = 128
    for size in (2, 5, 12, 30):
        agree = total = 0
        exact_sum = 0.0
        n_pairs = 600
        for _ in range(n_pairs):
            pool = rng.integers(0, 2**64, size=2 * size, dtype=np.uint64)
            a = pool[:size]
            b = np.concatenate([pool[: size // 2], pool[size : size + size - size // 2]])
            sa, sb = set(a.tolist()), set(b.tolist())
            exact_sum += len(sa & sb) / len(sa | sb)
            sig = oph_packed(np.concatenate([a, b]), np.array([0, a.size, a.size + b.size]), 9, k)
            agree += int(np.count_nonzero(sig[0] == sig[1]))
            total += k
        r = exact_sum / n_pairs
        p = agree / total
        # pairs are independent; positions within a pair are not, so the pool's standard
        # error is taken per pair, with one pair's variance at most r(1 - r) (a 0/1 pair)
        se = np.sqrt(r * (1 - r) / n_pairs)
        assert abs(p - r) <= 3.5 * se, (size, p, r)


def test_every_position_filled_and_empty_set_empty() -> None:
    rng = np.random.default_rng(1)
    sets = [rng.integers(0, 2**64, size=n, dtype=np.uint64) for n in (0, 1, 2, 7, 128, 5000)]
    offsets = np.cumsum([0] + [x.size for x in sets])
    sig = oph_packed(np.concatenate(sets), offsets, 4, 128)
    assert np.all(sig[0] == EMPTY_VALUE)
    # one shingle: every bin is densified from the only filled one
    assert np.unique(sig[1]).size == 1
    for row, values in zip(sig[1:], sets[1:], strict=True):
        # a densified bin copies a filled one: at most as many distinct values as shingles
        assert np.unique(row).size <= values.size
        # the same set in another order, with repeats, gives the same sketch
        again = np.repeat(values[::-1], 2)
        assert np.array_equal(oph_packed(again, np.array([0, again.size]), 4, 128)[0], row)
    # a large set fills every bin itself: K distinct values
    assert np.unique(sig[-1]).size == 128


def test_batch_kernel_equals_single_text_path() -> None:
    """The batch kernel and `sketch_text` (sorted set, separate call) agree for OPH."""
    s = Settings(num_perm=96)
    rng = random.Random(5)
    texts = ["", "one", "a rose is a rose is a rose"]
    texts += [" ".join(rng.choice(VOCAB) for _ in range(n)) for n in (4, 5, 6, 30, 90, 3000)]
    batch = sketch_batch([canonicalize(t) for t in texts], s)
    for i, t in enumerate(texts):
        one = sketch_text(t, s)
        assert np.array_equal(batch.minhash[i], one.minhash), i
        assert np.array_equal(batch.supershingles[i], one.supershingles), i
        assert batch.shingle_fp[i] == one.shingle_fp


def test_oph_and_classic_differ_only_in_the_signature() -> None:
    rng = random.Random(6)
    texts = [" ".join(rng.choice(VOCAB) for _ in range(n)) for n in (10, 200)]
    oph = sketch_texts(texts, Settings())
    classic = sketch_texts(texts, Settings(sketch="classic"))
    assert np.array_equal(oph.shingle_fp, classic.shingle_fp)
    assert np.array_equal(oph.lexical_fp, classic.lexical_fp)
    assert np.array_equal(oph.n_shingles, classic.n_shingles)
    assert np.count_nonzero(oph.minhash == classic.minhash) < 5


def _golden_texts() -> list[str]:
    rng = random.Random(2016)
    vocab = [f"w{i}" for i in range(3000)]
    out = ["", "one", "Two words.", "a rose is a rose is a rose"]
    out += ["ΟΔΟΣ İstanbul ünïcode 東京都の天気"]
    out += [" ".join(rng.choice(vocab) for _ in range(n)) for n in (3, 5, 6, 40, 400, 2000)]
    return out


def _digest(settings: Settings) -> str:
    b = sketch_texts(_golden_texts(), settings)
    h = hashlib.sha256()
    for arr in (b.minhash, b.supershingles, b.shingle_fp, b.lexical_fp, b.n_shingles):
        h.update(np.ascontiguousarray(arr).tobytes())
    return h.hexdigest()


# Digests computed with the code of main before the one-permutation sketch existed (commit
# 2ad487e, where every sketch was classic): the classic sketch must not change a bit, or the
# runs and indexes stored since could no longer be compared with new pages.
@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        (
            Settings(sketch="classic"),
            "dc258fbfe7b9bae0749c602fab8015ce5320fad4a8effe7b09e844af3895beda",
        ),
        (Settings.fetterly(), "36e4da6f1d40f7fd5a1ffb8738ff2b562e64792cfc3182da07803ea393ebd710"),
        (
            Settings(num_perm=37, sketch="classic"),
            "7d6d2f0afe5c57dc7ecec5599e6c88fe085bc7d5c8b33a9a421b3362bfb104a2",
        ),
    ],
)
def test_classic_sketch_is_bit_identical_to_before(settings: Settings, expected: str) -> None:
    assert _digest(settings) == expected


def test_minhash_packed_is_still_classic() -> None:
    rng = np.random.default_rng(5)
    v = rng.integers(0, 2**64, size=1000, dtype=np.uint64)
    out = minhash_packed(v, np.array([0, 10, 10, 1000]), 3, 64)
    expected = "526cd8595b84e5a3095ac7b95d5a6c97aefcada55a9281ffcd4405fa2e8b1f7a"
    assert hashlib.sha256(out.tobytes()).hexdigest() == expected
