"""Seeded near-duplicate generators that work on word lists, with stated rates.

Every generator takes an explicit `numpy.random.Generator`, so a crawl built from one seed is
reproducible and each edit's strength is a parameter a test can assert on. The rates are per
word of the input: `mutate(words, rng, substitute_rate=0.02)` replaces about 2 % of the words.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from neardup.synth.corpus import Document, Section


def mutate(
    words: Sequence[str],
    rng: np.random.Generator,
    insert_rate: float = 0.0,
    delete_rate: float = 0.0,
    substitute_rate: float = 0.0,
    vocabulary: Sequence[str] | None = None,
) -> list[str]:
    """Insert, delete and substitute words independently at the given per-word rates.

    Each input word is deleted with probability `delete_rate`, otherwise replaced with
    probability `substitute_rate` by a different word; independently, a new word follows it
    with probability `insert_rate`. New words come from `vocabulary` (default: the input's own
    words, so edits read like the page's language rather than noise).
    """
    if delete_rate + substitute_rate > 1.0:
        raise ValueError("delete_rate + substitute_rate must not exceed 1")
    for rate in (insert_rate, delete_rate, substitute_rate):
        if not 0.0 <= rate <= 1.0:
            raise ValueError("rates must lie in [0, 1]")
    n = len(words)
    if n == 0:
        return []
    vocab = np.unique(np.asarray(vocabulary if vocabulary is not None else words, dtype=object))
    if len(vocab) < 2 and (insert_rate or substitute_rate):
        raise ValueError("need at least two distinct vocabulary words")
    op = rng.random(n)
    deleted = op < delete_rate
    substituted = ~deleted & (op < delete_rate + substitute_rate)
    inserted = rng.random(n) < insert_rate
    picks = rng.integers(0, len(vocab), size=n)
    extra = rng.integers(0, len(vocab), size=n)
    # A substitute equal to the original would be no edit at all; take the next vocabulary word.
    position = {w: i for i, w in enumerate(vocab)}
    out: list[str] = []
    for i, word in enumerate(words):
        if substituted[i]:
            new = vocab[picks[i]]
            if new == word:
                new = vocab[(position[word] + 1) % len(vocab)]
            out.append(str(new))
        elif not deleted[i]:
            out.append(word)
        if inserted[i]:
            out.append(str(vocab[extra[i]]))
    return out


def swap_boilerplate(
    words: Sequence[str],
    header: Sequence[str],
    footer: Sequence[str],
    *,
    strip_header: int = 0,
    strip_footer: int = 0,
) -> list[str]:
    """Replace a page's header and footer blocks, as a mirror with its own site template does.

    The first `strip_header` and last `strip_footer` words (the old blocks) are removed and
    `header`/`footer` are put around what remains. The body is untouched, so the pages differ
    only in boilerplate: the most common near-duplicate on the web.
    """
    end = len(words) - strip_footer
    if strip_header < 0 or strip_footer < 0 or strip_header > end:
        raise ValueError("cannot strip more words than the page has")
    return [*header, *words[strip_header:end], *footer]


def truncate(words: Sequence[str], keep_fraction: float) -> list[str]:
    """Keep the first `keep_fraction` of the words (an excerpt, or a page cut off mid-crawl)."""
    if not 0.0 <= keep_fraction <= 1.0:
        raise ValueError("keep_fraction must lie in [0, 1]")
    return list(words[: round(len(words) * keep_fraction)])


def shingles(words: Sequence[str], size: int = 5) -> set[tuple[str, ...]]:
    """The set of `size`-word shingles of lower-cased words; a shorter text is one shingle.

    A plain reference implementation for tests and ground truth; the pipeline hashes shingles
    of its own canonical text instead.
    """
    low = tuple(w.lower() for w in words)
    if not low:
        return set()
    if len(low) <= size:
        return {low}
    return {low[i : i + size] for i in range(len(low) - size + 1)}


def jaccard(a: Sequence[str], b: Sequence[str], size: int = 5) -> float:
    """Exact word-shingle resemblance of two word lists (1.0 for two empty texts)."""
    sa, sb = shingles(a, size), shingles(b, size)
    if not sa and not sb:
        return 1.0
    return len(sa & sb) / len(sa | sb)


def expected_jaccard(
    n_words: int,
    size: int = 5,
    insert_rate: float = 0.0,
    delete_rate: float = 0.0,
    substitute_rate: float = 0.0,
) -> float:
    """Approximate word-shingle Jaccard between a text of `n_words` words and `mutate` of it.

    A shingle survives when none of its `size` words is deleted or substituted and nothing is
    inserted between them (the rates being independent per word). With S original shingles,
    S·p survive, and the edited text has about S·(1 + insert - delete) shingles; repeated
    phrases and substitutes that happen to recreate a shingle are ignored, so real texts
    come out slightly higher.
    """
    n_sh = max(n_words - size + 1, 1)
    p = (1.0 - delete_rate - substitute_rate) ** size * (1.0 - insert_rate) ** (size - 1)
    inter = n_sh * p
    other = max(n_words * (1.0 + insert_rate - delete_rate) - size + 1, 1.0)
    return inter / (n_sh + other - inter)


def edit_document(
    doc: Document,
    rng: np.random.Generator,
    insert_rate: float = 0.0,
    delete_rate: float = 0.0,
    substitute_rate: float = 0.0,
) -> Document:
    """`mutate` applied line by line, so the edited page keeps its paragraphs and code blocks."""

    vocab = sorted(set(doc.words))  # new words come from the page itself, like an author's

    def edit(text: str) -> str:
        return "\n".join(
            " ".join(mutate(line.split(), rng, insert_rate, delete_rate, substitute_rate, vocab))
            for line in text.split("\n")
        )

    sections = tuple(Section(s.heading, tuple(edit(p) for p in s.paragraphs)) for s in doc.sections)
    return Document(doc.doc_id, doc.title, sections)


def truncate_document(doc: Document, keep_fraction: float) -> Document:
    """The first `keep_fraction` of a document's paragraphs (at least one), headings kept."""
    total = sum(len(s.paragraphs) for s in doc.sections)
    keep = max(1, round(total * keep_fraction))
    sections = []
    for s in doc.sections:
        if keep <= 0:
            break
        sections.append(Section(s.heading, s.paragraphs[:keep]))
        keep -= len(s.paragraphs)
    return Document(doc.doc_id, doc.title, tuple(sections))
