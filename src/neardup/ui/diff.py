"""Two near-duplicates side by side, their differences marked, rendered on the server.

The diff runs on word tokens (whitespace-split, punctuation kept), the unit near-duplicate
detection itself compares, so a reflowed paragraph shows no change and an edited word shows
as one. Texts are capped: SequenceMatcher is quadratic in the worst case, and a page of more
than `MAX_WORDS` words is not read side by side anyway.
"""

from __future__ import annotations

from dataclasses import dataclass
from difflib import SequenceMatcher

from markupsafe import Markup, escape

MAX_WORDS = 20_000


@dataclass
class WordDiff:
    """Segments of each side as (op, text): op is 'equal', 'del' (left) or 'ins' (right)."""

    left: list[tuple[str, str]]
    right: list[tuple[str, str]]
    ratio: float
    truncated: bool
    changed_words: int

    def html(self, side: str) -> Markup:
        """One side as HTML: changed runs in <del> (left) or <ins> (right), all escaped."""
        parts = []
        for op, text in self.left if side == "left" else self.right:
            parts.append(str(escape(text)) if op == "equal" else f"<{op}>{escape(text)}</{op}>")
        return Markup(" ".join(parts))


def word_diff(a: str, b: str, max_words: int = MAX_WORDS) -> WordDiff:
    """The word-level diff of texts `a` and `b` (each cut to `max_words` words)."""
    wa, wb = a.split(), b.split()
    truncated = len(wa) > max_words or len(wb) > max_words
    wa, wb = wa[:max_words], wb[:max_words]
    matcher = SequenceMatcher(None, wa, wb, autojunk=False)
    left: list[tuple[str, str]] = []
    right: list[tuple[str, str]] = []
    changed = 0
    for op, i1, i2, j1, j2 in matcher.get_opcodes():
        if op == "equal":
            left.append(("equal", " ".join(wa[i1:i2])))
            right.append(("equal", " ".join(wb[j1:j2])))
            continue
        if i2 > i1:
            left.append(("del", " ".join(wa[i1:i2])))
        if j2 > j1:
            right.append(("ins", " ".join(wb[j1:j2])))
        changed += max(i2 - i1, j2 - j1)
    return WordDiff(left, right, matcher.ratio(), truncated, changed)
