"""Shingling: counts by hand, wrap-around, and the SWAR token kernel against a plain reference."""

from __future__ import annotations

import random

import numpy as np
import pytest

from neardup.config import Settings
from neardup.kernels import doc_shingle_counts, shingle_hashes
from neardup.kernels.shingles import shingle_params

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def mix64(x: int) -> int:
    x &= M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & M64
    return x ^ (x >> 31)


def rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & M64


def combine(h: int, v: int) -> int:
    k = (rotl((v * 0x87C37B91114253D5) & M64, 31) * 0x4CF5AD432745937F) & M64
    h ^= k
    return (rotl(h, 27) * 5 + 0x52DCE729) & M64


def ref_token_hash(token: bytes, seed: int) -> int:
    """The documented token hash, one byte at a time."""
    h = seed
    full = len(token) // 8 * 8
    for i in range(0, full, 8):
        h = combine(h, int.from_bytes(token[i : i + 8], "little"))
    tail = int.from_bytes(token[full:], "little")
    return mix64(((h ^ tail) + len(token) * GOLDEN) & M64)


def ref_shingles(canonical: str, w: int, wrap: bool, seed: int) -> list[int]:
    tseed, coeffs, sseed = shingle_params(seed, w)
    toks = [ref_token_hash(t.encode(), int(tseed)) for t in canonical.split(" ") if t]
    n = len(toks)
    if n == 0:
        return []
    if wrap:
        spans = [[toks[(p + j) % n] for j in range(w)] for p in range(n)]
    elif n >= w:
        spans = [toks[p : p + w] for p in range(n - w + 1)]
    else:
        spans = [toks]
    out = []
    for span in spans:
        acc = sum(int(c) * t for c, t in zip(coeffs, span, strict=False)) & M64
        out.append(mix64(acc ^ ((int(sseed) + len(span) * GOLDEN) & M64)))
    return out


ROSE = "a rose is a rose is a rose"


def test_broder_example_without_wrap() -> None:
    # 8 tokens, 4-shingles: 5 positions, 3 distinct (the paper's example).
    fp = shingle_hashes(ROSE, 4, False, 1)
    assert fp.dtype == np.uint64
    assert fp.size == 5
    assert np.unique(fp).size == 3
    assert fp[0] == fp[3] and fp[1] == fp[4]
    assert len({fp[0], fp[1], fp[2]}) == 3


def test_wrap_gives_one_shingle_per_word() -> None:
    # Fetterly: wrapping at the end so that each word starts exactly one shingle.
    fp = shingle_hashes(ROSE, 4, True, 1)
    assert fp.size == 8
    # (a rose is a) (rose is a rose) (is a rose is) + (is a rose a) (a rose a rose)
    # (rose a rose is) from the wrap: 6 distinct.
    assert np.unique(fp).size == 6
    assert np.array_equal(fp[:5], shingle_hashes(ROSE, 4, False, 1))


@pytest.mark.parametrize(
    ("text", "w", "wrap", "expected"),
    [
        ("", 5, False, 0),
        ("", 5, True, 0),
        ("one", 5, False, 1),
        ("one", 5, True, 1),
        ("one two", 5, False, 1),
        ("one two", 5, True, 2),
        ("a b c d e", 5, False, 1),
        ("a b c d e", 5, True, 5),
        ("a b c d e f g", 5, False, 3),
        ("a b c d e f g", 5, True, 7),
        ("a b c", 1, False, 3),
    ],
)
def test_shingle_counts(text: str, w: int, wrap: bool, expected: int) -> None:
    assert shingle_hashes(text, w, wrap, 1).size == expected


def test_short_document_is_one_shingle_of_all_tokens() -> None:
    short = shingle_hashes("one two", 5, False, 1)
    assert short.size == 1
    # Not the same as any 5-token shingle that starts with the same words.
    assert short[0] not in set(shingle_hashes("one two three four five", 5, False, 1))


def test_order_and_context() -> None:
    a = shingle_hashes("x a rose is a", 4, False, 3)
    b = shingle_hashes("a rose is a y", 4, False, 3)
    assert a[1] == b[0]  # the shared shingle (a rose is a) has one fingerprint
    assert shingle_hashes("a b", 2, False, 3)[0] != shingle_hashes("b a", 2, False, 3)[0]


def test_seeded() -> None:
    assert np.array_equal(shingle_hashes(ROSE, 4, False, 7), shingle_hashes(ROSE, 4, False, 7))
    assert not np.intersect1d(
        shingle_hashes(ROSE, 4, False, 7), shingle_hashes(ROSE, 4, False, 8)
    ).size


def test_runs_of_spaces_are_one_separator() -> None:
    assert np.array_equal(
        shingle_hashes("  a  rose   is ", 2, False, 1), shingle_hashes("a rose is", 2, False, 1)
    )


def _random_canonical(rng: random.Random, n_words: int) -> str:
    # Tokens of every length around the 8-byte word boundaries, ASCII and multi-byte.
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789éßж中"
    words = []
    for _ in range(n_words):
        length = rng.choice([1, 2, 3, 5, 7, 8, 9, 15, 16, 17, 23, 24, 25, 40])
        words.append("".join(rng.choice(alphabet) for _ in range(length)))
    return " ".join(words)


@pytest.mark.parametrize("wrap", [False, True])
@pytest.mark.parametrize("w", [1, 2, 5, 9])
def test_kernel_matches_reference(w: int, wrap: bool) -> None:
    rng = random.Random(w * 2 + wrap)
    for n_words in [0, 1, 2, 3, 4, 5, 8, 9, 10, 33, 200]:
        text = _random_canonical(rng, n_words)
        got = shingle_hashes(text, w, wrap, 11).tolist()
        assert got == ref_shingles(text, w, wrap, 11), (n_words, text[:80])


def test_same_long_token_same_hash_anywhere() -> None:
    # 8-, 16- and 17-byte tokens in the middle and at the very end of the buffer.
    for tok in ["abcdefgh", "abcdefghijklmnop", "abcdefghijklmnopq", "ünïcödé"]:
        fp = shingle_hashes(f"{tok} x {tok}", 1, False, 1)
        assert fp[0] == fp[2] != fp[1]


def test_doc_shingle_counts_counts_documents_once() -> None:
    s = Settings(shingle_size=2)
    hashes, counts = doc_shingle_counts(["a b a b a b", "a b c", "x y"], s)
    assert hashes.dtype == np.uint64 and counts.dtype == np.int64
    assert np.all(hashes[1:] > hashes[:-1])
    ab = shingle_hashes("a b", 2, False, s.seed)[0]
    ba = shingle_hashes("b a", 2, False, s.seed)[0]
    by_hash = dict(zip(hashes.tolist(), counts.tolist(), strict=True))
    assert by_hash[int(ab)] == 2  # twice in doc 0, once in doc 1
    assert by_hash[int(ba)] == 1
    assert counts.sum() == 2 + 2 + 1  # {ab, ba} + {ab, bc} + {xy}
