"""Real Chinese, Japanese and Thai text, and planted near-duplicates of it.

The text is Django's own translations (the `django.po` catalogues it installs under
`django/**/locale/<lang>/LC_MESSAGES/`), written by people for people: the messages of
forms, the admin and the date helpers, the kind of text that fills real web pages. Nothing
is copied into this repository; the text is read from the installed package at test time
(Django is in the `dev` extra). Shared by tests/kernels/test_scripts.py and
bench/scripts_bench.py.

The truth for a pair of pages is the exact Jaccard of their sets of character 5-grams
(whitespace removed), computed here in plain Python. A character is what a reader counts as
one: a code point with the combining marks after it (a Thai consonant with its tone mark).
For Chinese and Japanese that is every code point; for Thai, code-point 5-grams are shorter
windows (1.5 code points make a character) and give higher Jaccard for the same edits.
"""

from __future__ import annotations

import importlib.util
import os
import random
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import pytest

LANGUAGES = {"zh": "zh_Hans", "ja": "ja", "th": "th"}
_MSGSTR = re.compile(r'msgstr(?:\[\d+\])? "(.*)"')
_MARKUP = re.compile(r"%\(\w+\)[.\d]*[a-z]|%[sdif]|\{[^}]*\}|<[^>]*>|\\[nt\"]")


def django_locale_root() -> Path:
    """The installed Django package, or skip (fail on CI, where the dev extra is installed)."""
    spec = importlib.util.find_spec("django")
    if spec is None or not spec.submodule_search_locations:
        if os.environ.get("CI"):
            raise RuntimeError("django (the dev extra) must be installed on CI")
        pytest.skip("django is not installed (pip install -e '.[dev]'): no real CJK/Thai text")
    return Path(next(iter(spec.submodule_search_locations)))


def messages(lang: str) -> list[str]:
    """The distinct translated messages of one language, sorted, without the catalogue
    header and with placeholders, markup and escapes (`%(name)s`, `{0}`, `<a>`, `\\n`)
    replaced by spaces."""
    root = django_locale_root()
    found: set[str] = set()
    for po in sorted(root.glob(f"**/locale/{LANGUAGES[lang]}/LC_MESSAGES/django.po")):
        current: list[str] | None = None
        for line in [*po.read_text(encoding="utf-8").splitlines(), ""]:
            m = _MSGSTR.match(line)
            if m:
                current = [m.group(1)]
            elif line.startswith('"') and current is not None:
                current.append(line[1:-1])
            else:
                if current:
                    found.add("".join(current))
                current = None
    cleaned = {" ".join(_MARKUP.sub(" ", m).split()) for m in found if "Content-Type" not in m}
    return sorted(m for m in cleaned if m)


@dataclass
class Page:
    url: str
    text: str
    group: int  # the paragraph it was made from


def _edit(text: str, k: int, alphabet: list[str], rng: random.Random) -> str:
    """`k` single-character edits (substitute, delete or insert) at letters of `text`."""
    chars = list(text)
    for _ in range(k):
        spots = [i for i, c in enumerate(chars) if c.isalpha()]
        i = rng.choice(spots)
        op = rng.randrange(3)
        if op == 0:
            chars[i] = rng.choice(alphabet)
        elif op == 1:
            del chars[i]
        else:
            chars.insert(i, rng.choice(alphabet))
    return "".join(chars)


def planted_pages(lang: str, length: int = 400, seed: int = 0) -> list[Page]:
    """Unrelated paragraphs of about `length` characters (disjoint sets of messages, as
    many as the catalogues fill); two of every three get 2 or 3 copies, each with 3 to 8
    characters changed. 400 characters is where 3 changes leave a character 5-gram
    Jaccard just above 0.9, so the set holds pairs on both sides of that line."""
    rng = random.Random(seed)
    pool = messages(lang)
    rng.shuffle(pool)
    paragraphs: list[str] = []
    current: list[str] = []
    for msg in pool:
        current.append(msg)
        if sum(len(characters(m)) for m in current) >= length:
            paragraphs.append(" ".join(current))
            current = []
    alphabet = sorted({c for p in paragraphs for c in p if c.isalpha() and not c.isascii()})
    pages: list[Page] = []
    for g, para in enumerate(paragraphs):
        pages.append(Page(f"https://{lang}.example/p{g}/", para, g))
        if g % 3 == 2:
            continue
        for c in range(rng.choice((2, 3))):
            text = _edit(para, rng.randint(3, 8), alphabet, rng)
            pages.append(Page(f"https://{lang}-copy{c}.example/p{g}/", text, g))
    return pages


def characters(text: str) -> list[str]:
    """User-perceived characters of `text` without its whitespace: each code point with the
    combining marks (general category M*) after it, so a Thai consonant with its vowel sign
    and tone mark is one character, as a reader (and UAX #29) counts them."""
    out: list[str] = []
    for ch in "".join(text.split()):
        if out and unicodedata.category(ch).startswith("M"):
            out[-1] += ch
        else:
            out.append(ch)
    return out


def char_grams(text: str, n: int = 5, code_points: bool = False) -> set[tuple[str, ...]]:
    """The set of character n-grams of `text` with its whitespace removed; characters are
    user-perceived (see `characters`), or single code points when `code_points`."""
    s = list("".join(text.split())) if code_points else characters(text)
    return {tuple(s[i : i + n]) for i in range(max(len(s) - n + 1, 1))}


def jaccard(a: set[tuple[str, ...]], b: set[tuple[str, ...]]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0
