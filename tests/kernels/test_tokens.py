"""Canonical token stream: examples, and the kernel against a per-character reference."""

from __future__ import annotations

import random
import sys
import unicodedata

import pytest

from neardup.kernels import canonicalize, canonicalize_batch


def reference(text: str) -> str:
    """The definition in neardup.kernels.tokens, one character at a time."""
    words: list[str] = []
    current: list[str] = []
    for ch in text:
        if ch.isalnum() or (current and unicodedata.category(ch).startswith("M")):
            current.append("σ" if ch in "Σς" else ch.lower())
        elif current:
            words.append("".join(current))
            current = []
    if current:
        words.append("".join(current))
    return " ".join(words)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("   \n\t ", ""),
        ("Hello, World!", "hello world"),
        ("A Rose is a ROSE.", "a rose is a rose"),
        ('<p class="x">Hi&nbsp;there</p>', "p class x hi nbsp there p"),
        ("snake_case and kebab-case", "snake case and kebab case"),
        ("don't stop", "don t stop"),
        ("price: $3.50 (20%)", "price 3 50 20"),
        ("Ünïcödé STRASSE Straße", "ünïcödé strasse straße"),
        ("ΟΔΟΣ οδός", "οδοσ οδόσ"),
        ("İstanbul", "i̇stanbul"),
        ("naïve, composed", "naïve composed"),  # decomposed: i + U+0308 stays one word
        ("ŞEHİR 東京タワー 2024年", "şehi̇r 東京タワー 2024年"),
        ("हिन्दी भाषा", "हिन्दी भाषा"),  # vowel signs and virama are marks
        ("ok 👍\ufe0f fine", "ok fine"),  # a mark after a separator is a separator
        ("x\u0301 \u0301y", "x\u0301 y"),
        ("tab\tnew\nline\r\nend", "tab new line end"),
        ("a\ud800b", "a b"),  # a lone surrogate separates
    ],
)
def test_examples(text: str, expected: str) -> None:
    assert canonicalize(text) == expected
    assert reference(text) == expected


def test_every_code_point_matches_reference() -> None:
    chars = [chr(c) for c in range(sys.maxunicode + 1)]
    # Each character alone, after a letter (marks attach), and between letters.
    for sep in ("", "a"):
        text = " ".join(sep + c + "b" for c in chars)
        assert canonicalize(text) == reference(text)
    text = "".join(chars)
    assert canonicalize(text) == reference(text)


def test_random_mixtures_and_batch() -> None:
    rng = random.Random(5)
    pool = "aZ09 ,.-_<>/&;:'\"\t\nÉéßΣσςİıЖж中文ـً\u0301\u0308👍\ufe0f\u200b\u00a0\ud800"
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 60))) for _ in range(300)]
    expected = [reference(t) for t in texts]
    assert [canonicalize(t) for t in texts] == expected
    assert canonicalize_batch(texts) == expected
    assert canonicalize_batch([]) == []


def test_ascii_fast_path_agrees_with_kernel() -> None:
    ascii_chars = "".join(chr(c) for c in range(128))
    text = " ".join(a + b for a in ascii_chars for b in "aZ9_ ")
    assert canonicalize(text) == canonicalize_batch([text])[0] == reference(text)


def test_idempotent() -> None:
    text = "Some <b>HTML</b> — with ünïcode, İ and ΟΔΟΣ."
    once = canonicalize(text)
    assert canonicalize(once) == once
