"""Texts for the crawls and service tests: random pages over a closed vocabulary, and edits of
a known size, so two crawls differ by amounts the tests can state."""

from __future__ import annotations

import random

import numpy as np

WORDS = [f"w{i}" for i in range(5000)]


def random_text(seed: int, n: int = 300) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def edit_text(text: str, share: float, seed: int) -> str:
    """Replace a contiguous `share` of the words, so the shingle sets differ by a known amount."""
    words = text.split()
    cut = int(len(words) * share)
    words[:cut] = random_text(seed, cut).split() if cut else []
    return " ".join(words)


def near_copies(n: int, seed: int, vocab: int, words: int, bases: int, edits: int) -> list[str]:
    """`n` texts, each one of `n // bases` random base texts (`words` words from `vocab`)
    with fewer than `edits` of its words replaced: groups of near copies, some identical."""
    rng = np.random.default_rng(seed)
    names = [f"w{i}" for i in range(vocab)]
    base = [" ".join(rng.choice(names, words)) for _ in range(max(1, n // bases))]
    out = []
    for i in range(n):
        text = base[i % len(base)].split()
        for _ in range(int(rng.integers(0, edits))):
            text[int(rng.integers(0, len(text)))] = f"e{int(rng.integers(0, 10**6))}"
        out.append(" ".join(text))
    return out
