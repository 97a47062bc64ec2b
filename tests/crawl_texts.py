"""Texts for the crawls tests: random pages over a closed vocabulary, and edits of a known
size, so two crawls differ by amounts the tests can state."""

from __future__ import annotations

import random

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
