"""Link targets of an HTML page found by one compiled pass over its bytes.

Why: the links were three regular-expression passes over every page (`a`/`area` `href`,
`frame`/`iframe` `src`, `base` `href`, after a pass that cut out comments): on the
docs-mirrors crawl about 2.1 CPU-seconds for 13,420 pages, a fifth of the scan's work
beyond the HTML-to-text floor (issue 29). Resiliparse's tree builds a Python object per
element (about 13 µs each), dearer still on navigation-heavy sites. This kernel visits
each `<` once and reads the tag in place, and gives the byte spans of the attribute values.

What it matches is exactly what these expressions found (ASCII case folded, `\\s` being
space, tab, line feed, vertical tab, form feed and carriage return), compared with them in
the tests on generated markup:

    <(?:a|area)\\s(?:[^>\\s"']*[\\s"'])*?href\\s*=\\s*["']?([^"'\\s>]*)      every match
    <(?:i?frame)\\s(?:[^>\\s"']*[\\s"'])*?src\\s*=\\s*["']?([^"'\\s>]*)      every match
    <(?:base)\\s(?:[^>\\s"']*[\\s"'])*?href\\s*=\\s*["']?([^"'\\s>]*)        the first

An attribute starts the tag's text or follows whitespace or a quote (so `data-href` is not
`href`), and the tag ends the search at its first `>`. Each of the three is its own
left-to-right scan: a match resumes its own scan at the end of the value, as `findall` does.
Comments (`<!--` up to the next `-->`) were cut out before the expressions ran; here a `<!--`
stops the scan, and the page is cut (`without_comments`) and scanned again (5 of the
docs-mirrors crawl's 13,420 pages have a comment).
"""

from __future__ import annotations

import numpy as np

from neardup.kernels.jit import njit

_LT, _GT, _EQ = 60, 62, 61
_DQUOTE, _SQUOTE = 34, 39
_HREF = np.frombuffer(b"href", np.uint8)
_SRC = np.frombuffer(b"src", np.uint8)
_A = np.frombuffer(b"a", np.uint8)
_AREA = np.frombuffer(b"area", np.uint8)
_FRAME = np.frombuffer(b"frame", np.uint8)
_IFRAME = np.frombuffer(b"iframe", np.uint8)
_BASE = np.frombuffer(b"base", np.uint8)


@njit(inline="always")
def _space(c: int) -> bool:
    return c == 32 or (9 <= c <= 13)


@njit(inline="always")
def _delimiter(c: int) -> bool:
    return _space(c) or c in (_DQUOTE, _SQUOTE)


@njit(inline="always")
def _word_at(s: np.ndarray, i: int, word: np.ndarray) -> bool:
    """`word` (lower-case ASCII letters) at `s[i:]`, ASCII case folded."""
    if i + word.size > s.size:
        return False
    k = 0
    while k < word.size and (s[i + k] | 32) == word[k]:
        k += 1
    return k == word.size


@njit(inline="always")
def _tag_at(s: np.ndarray, i: int, name: np.ndarray) -> int:
    """Where the attributes start when `<name` and one whitespace character are at `s[i]`
    (the `<`), else -1."""
    end = i + 1 + name.size
    if end < s.size and _word_at(s, i + 1, name) and _space(s[end]):
        return end + 1
    return -1


@njit(cache=True, nogil=True)
def _value_after(s: np.ndarray, q: int, attr: np.ndarray) -> tuple[int, int]:
    """The span of `attr`'s value in the tag whose attributes start at `q`; without one,
    (-1, where the search stopped: the tag's `>` or the end)."""
    n = s.size
    while True:
        if _word_at(s, q, attr):
            k = q + attr.size
            while k < n and _space(s[k]):
                k += 1
            if k < n and s[k] == _EQ:
                k += 1
                while k < n and _space(s[k]):
                    k += 1
                if k < n and (s[k] == _DQUOTE or s[k] == _SQUOTE):
                    k += 1
                start = k
                while k < n and not _delimiter(s[k]) and s[k] != _GT:
                    k += 1
                return start, k
        # not here: skip a run of other characters and one delimiter
        k = q
        while k < n and not _delimiter(s[k]) and s[k] != _GT:
            k += 1
        if k >= n or s[k] == _GT:
            return -1, k
        q = k + 1


@njit(cache=True, nogil=True)
def link_spans(
    s: np.ndarray, frames: bool, comments: bool
) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    """Spans of the link targets in `s` (uint8): their starts and ends, the `href`s of
    `a`/`area` in document order, then, when `frames`, the `src`s of `frame`/`iframe`; how
    many of them are `href`s; the first `base` `href`'s span (-1, -1 when there is none).
    With `comments`, a `<!--` stops the scan and the count of `href`s is -1: the caller cuts
    the comments out and scans again (few pages have any)."""
    n = s.size
    hrefs = np.empty(32, np.int64)  # start, end, start, end, ...
    srcs = np.empty(32, np.int64)
    bases = np.empty(2, np.int64)  # the first only
    nh = ns = nb = 0
    # Where each findall-like scan goes on: after a value, or after a search that found
    # none (every tag of the kind that starts before where it stopped would search the same
    # places and find none: without this a page of `<a x` and no `>` took quadratic time).
    next_href = next_src = next_base = 0
    for i in range(n - 1):
        if s[i] != _LT:
            continue
        c = s[i + 1] | 32  # most tags are none of a, area, (i)frame, base: one test
        if c == 97 and i >= next_href:
            q = _either_tag(s, i, _A, _AREA)
            hrefs, nh, next_href = _match(s, q, _HREF, hrefs, nh, next_href)
        elif (c == 102 or c == 105) and frames and i >= next_src:
            q = _either_tag(s, i, _IFRAME, _FRAME)
            srcs, ns, next_src = _match(s, q, _SRC, srcs, ns, next_src)
        elif c == 98 and nb == 0 and i >= next_base:
            q = _tag_at(s, i, _BASE)
            bases, nb, next_base = _match(s, q, _HREF, bases, nb, next_base)
        elif comments and s[i + 1] == 33 and i + 3 < n and s[i + 2] == 45 and s[i + 3] == 45:
            return np.empty(0, np.int64), np.empty(0, np.int64), -1, -1, -1
    starts = np.empty(nh + ns, np.int64)
    ends = np.empty(nh + ns, np.int64)
    starts[:nh], ends[:nh] = hrefs[0 : 2 * nh : 2], hrefs[1 : 2 * nh : 2]
    starts[nh:], ends[nh:] = srcs[0 : 2 * ns : 2], srcs[1 : 2 * ns : 2]
    if nb == 0:
        return starts, ends, nh, -1, -1
    return starts, ends, nh, bases[0], bases[1]


@njit(inline="always")
def _either_tag(s: np.ndarray, i: int, tag: np.ndarray, other: np.ndarray) -> int:
    """`_tag_at` for `<tag` or else `<other`."""
    q = _tag_at(s, i, tag)
    return q if q >= 0 else _tag_at(s, i, other)


@njit(inline="always")
def _match(
    s: np.ndarray, q: int, attr: np.ndarray, spans: np.ndarray, count: int, resume: int
) -> tuple[np.ndarray, int, int]:
    """One step of a findall-like scan at a tag whose attributes start at `q` (-1: no tag
    of the kind): one with `attr` adds its value's span to `spans` and resumes the scan at
    the value's end; one without resumes it where its search stopped."""
    if q < 0:
        return spans, count, resume
    a, b = _value_after(s, q, attr)
    if a < 0:
        return spans, count, b
    return _put(spans, count, a, b), count + 1, b


@njit(inline="always")
def _put(spans: np.ndarray, k: int, a: int, b: int) -> np.ndarray:
    """`spans` with the k-th span (a, b) set, doubled when full."""
    if 2 * k + 2 > spans.size:
        bigger = np.empty(spans.size * 2, np.int64)
        bigger[: spans.size] = spans
        spans = bigger
    spans[2 * k], spans[2 * k + 1] = a, b
    return spans


def link_targets(payload: bytes) -> tuple[list[bytes], bytes | None]:
    """The raw link targets of an HTML page, in document order (`a`/`area` `href`s, then
    `frame`/`iframe` `src`s when the page, comments cut out, says "frame" or "FRAME"
    anywhere), and its first `base` `href` (None without one)."""
    starts, ends, hrefs, base_start, base_end = _spans(payload, True)
    if hrefs < 0:  # a comment: cut them all out, then scan what is left
        payload = without_comments(payload)
        starts, ends, hrefs, base_start, base_end = _spans(payload, False)
    found = [payload[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True)]
    return found, (payload[base_start:base_end] if base_start >= 0 else None)


def _spans(payload: bytes, comments: bool) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    frames = b"frame" in payload or b"FRAME" in payload
    return link_spans(np.frombuffer(payload, np.uint8), frames, comments)


def without_comments(payload: bytes) -> bytes:
    """`payload` with every `<!--` ... `-->` cut out: the first `-->` after each opening, as
    `re.sub(rb"<!--.*?-->", b"", payload, flags=re.DOTALL)` cuts them; an opening without an
    end leaves the rest as it is."""
    start = payload.find(b"<!--")
    if start < 0:
        return payload
    kept = []
    at = 0
    while start >= 0:
        end = payload.find(b"-->", start + 4)
        if end < 0:
            break
        kept.append(payload[at:start])
        at = end + 3
        start = payload.find(b"<!--", at)
    kept.append(payload[at:])
    return b"".join(kept)
