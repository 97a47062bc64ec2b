"""The compiled link scanner against the regular expressions it replaced, on tag soup."""

from __future__ import annotations

import html
import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.ingest.extract import _raw_links
from neardup.kernels.tags import link_spans, link_targets, without_comments


def _attr_pattern(tags: bytes, attr: bytes) -> re.Pattern[bytes]:
    return re.compile(
        rb"<(?:" + tags + rb")\s(?:[^>\s\"']*[\s\"'])*?" + attr + rb"\s*=\s*[\"']?([^\"'\s>]*)",
        re.IGNORECASE,
    )


_HREF = _attr_pattern(rb"a|area", rb"href")
_FRAME_SRC = _attr_pattern(rb"i?frame", rb"src")
_BASE_HREF = _attr_pattern(rb"base", rb"href")
_COMMENT = re.compile(rb"<!--.*?-->", re.DOTALL)


def reference_raw_links(payload: bytes, encoding: str) -> tuple[str | None, list[str]]:
    """What neardup did before the kernel: four regular-expression passes."""
    if b"<!--" in payload:
        payload = _COMMENT.sub(b"", payload)
    found = _HREF.findall(payload)
    if b"frame" in payload or b"FRAME" in payload:
        found += _FRAME_SRC.findall(payload)
    base = _BASE_HREF.search(payload)
    hrefs: list[str] = []
    for raw in dict.fromkeys(found):
        if not raw or raw.startswith(b"#"):
            continue
        value = raw.decode(encoding, errors="replace")
        hrefs.append(html.unescape(value) if "&" in value else value)
    base_href = base.group(1).decode(encoding, errors="replace") if base else None
    return (html.unescape(base_href) if base_href and "&" in base_href else base_href), hrefs


# Pieces that make the expressions' hard cases likely: tag names in any case and their
# look-alikes, every whitespace byte, quotes, `=`, `>`, comments opened and closed, values.
PIECES = [
    b"<a", b"<A", b"<area", b"<AREA", b"<abbr", b"<iframe", b"<IFrame", b"<frame",
    b"<FRAME", b"<framed", b"<base", b"<BASE", b"<", b">", b" ", b"\t", b"\n", b"\r",
    b"\x0b", b"\x0c", b"href", b"HREF", b"hReF", b"src", b"SRC", b"data-", b"x", b"=", b"\"",
    b"'", b"<!--", b"-->", b"--", b"-", b"!", b"#top", b"p.html", b"/d/", b"&amp;", b"\xc3\xa9",
    b"\xff",
]  # fmt: skip

soup = st.lists(st.sampled_from(PIECES), max_size=60).map(b"".join)


@settings(max_examples=3000, deadline=None)
@given(soup)
def test_links_are_what_the_expressions_found(payload: bytes) -> None:
    assert _raw_links(payload, "utf-8") == reference_raw_links(payload, "utf-8")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(PIECES), min_size=100, max_size=1500).map(b"".join))
def test_long_pages_with_many_links(payload: bytes) -> None:
    assert _raw_links(payload, "utf-8") == reference_raw_links(payload, "utf-8")


def test_hundreds_of_links_keep_their_order() -> None:
    page = b"".join(b"<p>%d</p><A  HREF='/p%d.html'>x</a>" % (i, i) for i in range(500))
    _, hrefs = _raw_links(page + b"<frame src=f>", "utf-8")
    assert hrefs == [f"/p{i}.html" for i in range(500)] + ["f"]


@settings(max_examples=1000, deadline=None)
@given(st.binary(max_size=200) | soup)
def test_comments_are_cut_as_the_expression_cuts_them(payload: bytes) -> None:
    assert without_comments(payload) == _COMMENT.sub(b"", payload)


def test_spans_in_document_order_then_frames_and_the_first_base() -> None:
    page = (
        b"<BASE\thref='http://b.example/'><base href=second>"
        b'<a title="x"href=one>1</a><iframe src="f.html"></iframe>'
        b"<area shape=rect HREF = two ><a data-href=no>3</a>"
    )
    starts, ends, hrefs, base_start, base_end = _scan(page)
    assert [page[a:b] for a, b in zip(starts, ends, strict=True)] == [b"one", b"two", b"f.html"]
    assert hrefs == 2
    assert page[base_start:base_end] == b"http://b.example/"
    starts, _, hrefs, base_start, _ = _scan(b"<p>no links</p>")
    assert starts.size == 0 and hrefs == 0 and base_start == -1
    # a comment stops the scan: the caller cuts the comments out and scans again
    assert _scan(b"<a href=x><!-- c --><a href=y>")[2] == -1
    assert link_targets(b"<a href=x><!-- <a href=z> --><a href=y>") == ([b"x", b"y"], None)


def _scan(page: bytes) -> tuple[np.ndarray, np.ndarray, int, int, int]:
    return link_spans(np.frombuffer(page, np.uint8), True, True)


def test_tags_that_never_close_are_read_once() -> None:
    """A search that finds no value stops the scan of its kind up to where it stopped (every
    later tag of the kind before there would search the same places): a page of unclosed
    tags is read in one pass, where the expressions went back to every tag."""
    small = b"<a x <base y <iframe z " * 2000
    assert _raw_links(small + b"FRAME", "utf-8") == reference_raw_links(small + b"FRAME", "utf-8")
    closing = small + b"<a data-href=1 href=last"
    expected = ("last", ["last"])  # the first <base> reaches the same href
    assert _raw_links(closing, "utf-8") == reference_raw_links(closing, "utf-8") == expected
    big = b"<a x <base y <iframe z " * 200_000  # 4.6 MB; quadratic, this would not end
    assert _raw_links(big + b"frame", "utf-8") == (None, [])
