"""extract_page: text, title, links and fingerprints, and a reason whenever there are none."""

from __future__ import annotations

import pickle
import random

import pytest
import xxhash

from neardup.ingest import extract_page
from neardup.ingest.extract import fingerprint
from neardup.ingest.record import ExtractedPage, RawRecord

PAGE = """<!doctype html><html><head><title>  A   title </title>
<base href="http://cdn.example/base/"><style>.x { color: red }</style></head>
<body><nav><a href="/">Home</a> <a href="docs/">Docs</a></nav>
<script>var hidden = "script text";</script>
<p>Body text <a href="#top">top</a> <a href="docs/">again</a> <a href="mailto:x@y">mail</a></p>
<map><area href="area.html"></map><iframe src="//frames.example/f"></iframe>
<a href="javascript:go()">js</a><footer>Footer text</footer></body></html>"""


def html_record(payload: bytes, **fields: object) -> RawRecord:
    base: dict[str, object] = {"content_type": "text/html", "url": "http://site.example/p/q.html"}
    base.update(fields)
    return RawRecord(source="t", offset=0, record_type="response", payload=payload, **base)


def test_html_text_title_links() -> None:
    page = extract_page(html_record(PAGE.encode()))
    assert page.format == "html" and page.skipped_reason is None
    assert page.title == "A title"
    text = page.text or ""
    for visible in ("Home", "Docs", "Body text", "Footer text"):
        assert visible in text  # navigation and footer are kept: no main-content extraction
    assert "script text" not in text and "color" not in text
    assert page.links == [
        "http://cdn.example/",
        "http://cdn.example/base/docs/",
        "http://cdn.example/base/area.html",
        "http://frames.example/f",
    ]
    assert page.payload_bytes == len(PAGE.encode())
    assert page.exact_fp == fingerprint(PAGE.encode())


def test_links_without_base_resolve_against_the_page() -> None:
    page = extract_page(html_record(b"<a href='../up.html'>x</a><a href='x#frag'>y</a>"))
    assert page.links == ["http://site.example/up.html", "http://site.example/p/x"]


@pytest.mark.parametrize(
    ("payload", "charset"),
    [
        ("<p>Grüße aus Köln</p>".encode("latin-1"), "ISO-8859-1"),
        ('<meta charset="windows-1252"><p>Grüße aus Köln</p>'.encode("cp1252"), None),
        ("\ufeff<p>Grüße aus Köln</p>".encode("utf-8"), "iso-8859-1"),  # BOM wins
        ("<p>Grüße aus Köln</p>".encode("utf-16-le"), "utf-16le"),
    ],
)
def test_html_encodings(payload: bytes, charset: str | None) -> None:
    page = extract_page(html_record(payload, charset=charset))
    assert "Grüße aus Köln" in (page.text or "")


def test_given_text() -> None:
    rec = RawRecord(source="t", offset=3, record_type="row", url="u", text="Some given text")
    page = extract_page(rec)
    assert page.format == "given" and page.text == "Some given text"
    assert page.exact_fp == fingerprint(b"Some given text")
    lone = extract_page(RawRecord(source="t", offset=0, record_type="row", text="a\ud800b"))
    assert lone.text == "a\ufffdb"


def test_plain_text_decoding() -> None:
    rec = RawRecord(
        "t",
        0,
        "response",
        content_type="text/plain",
        charset="koi8-r",
        payload="Привет".encode("koi8-r"),
    )
    assert extract_page(rec).text == "Привет"
    bad = RawRecord("t", 0, "response", content_type="text/plain", payload=b"ok \xff\xfe here")
    assert extract_page(bad).text == "ok \ufffd\ufffd here"


@pytest.mark.parametrize(
    ("content_type", "payload", "expected"),
    [
        ("application/octet-stream", b"  <!DOCTYPE html><title>t</title><p>x</p>", "html"),
        (None, b"<html><body>hello</body></html>", "html"),
        (None, b"just some words in a file", "text"),
        ("text/html", b"%PDF-1.4 not really a pdf", "unreadable pdf"),
        ("application/octet-stream", bytes(range(256)) * 4, "unsupported content type"),
        ("image/png", b"\x89PNG\r\n\x1a\n....", "unsupported content type: image/png"),
        ("text/xml", b"<?xml version='1.0'?><html><body>x</body></html>", "html"),
        ("application/pdf", b"%PDF-1.7\n garbage", "unreadable pdf"),
        ("text/html", b"   \n\t ", "empty text"),
        ("text/html", b"<html><body><script>x()</script></body></html>", "empty text"),
        (None, b"", "empty text"),
    ],
)
def test_kinds_and_reasons(content_type: str | None, payload: bytes, expected: str) -> None:
    page = extract_page(RawRecord("t", 0, "response", content_type=content_type, payload=payload))
    outcome = page.skipped_reason or page.format or ""
    assert outcome.startswith(expected)
    assert page.payload_bytes == len(payload)


def test_payload_too_large() -> None:
    page = extract_page(html_record(b"<p>" + b"a" * 100 + b"</p>"), max_payload_bytes=50)
    assert page.skipped_reason == "payload too large (107 bytes)"
    assert page.payload_bytes == 107


def test_reader_skip_passes_through() -> None:
    rec = RawRecord("t", 0, "request", payload=b"x", skipped_reason="not a page: request record")
    assert extract_page(rec) == ExtractedPage(skipped_reason="not a page: request record")


def test_fingerprint_is_signed_int64() -> None:
    data = next(
        d for d in (str(i).encode() for i in range(1000)) if xxhash.xxh3_64_intdigest(d) >= 2**63
    )
    value = fingerprint(data)
    assert value < 0 and value == xxhash.xxh3_64_intdigest(data) - 2**64
    assert -(2**63) <= value < 2**63


def test_never_raises_on_garbage() -> None:
    rng = random.Random(7)
    types = [None, "text/html", "application/pdf", "text/plain", "application/octet-stream"]
    for i in range(300):
        payload = bytes(rng.getrandbits(8) for _ in range(rng.randint(0, 600)))
        if i % 3 == 0:
            payload = b"%PDF-1.4\n" + payload
        elif i % 3 == 1:
            payload = b"<html><a href='" + payload + b"'>" + payload
        rec = RawRecord(
            "t",
            i,
            "response",
            url="http://e.x/",
            content_type=types[i % 5],
            charset=rng.choice([None, "utf-8", "bogus-charset", "utf-16"]),
            payload=payload,
        )
        page = extract_page(rec)
        assert page.skipped_reason or page.text
        pickle.loads(pickle.dumps(page))  # results cross process boundaries


def test_links_from_awkward_markup():
    from neardup.ingest.extract import _links

    html = (
        b"<html><head><BASE HREF='http://b.example/dir/'></head><body>"
        b"<a class=x href=\"one.html\">1</a> <A HREF='two.html?x=1&amp;y=2'>2</A>"
        b'<a href=three.html>3</a><a data-href="nope.html">no</a>'
        b'<!-- <a href="commented.html">c</a> -->'
        b'<iframe src="/frame.html"></iframe><area shape=rect href="#top">'
        b'<a href="mailto:x@y.example">m</a><a href="one.html">again</a>'
        b"</body></html>"
    )
    assert _links(html, "utf-8", "http://page.example/a/b.html") == [
        "http://b.example/dir/one.html",
        "http://b.example/dir/two.html?x=1&y=2",
        "http://b.example/dir/three.html",
        "http://b.example/frame.html",
    ]


def test_cached_resolution_matches_plain_resolution():
    from neardup.ingest.urls import resolve, resolve_cached

    bases = [
        "http://h.example/a/b/c.html?q=1",
        "https://h.example",
        "http://h.example/a/",
        "file:///tmp/site/x.html",
        None,
    ]
    hrefs = [
        "d.html",
        "../e.html",
        "/f",
        "?g=1",
        "//other.example/p",
        "https://x.example/y",
        "",
        "#frag",
        "./h/../i.html",
        "file:///tmp/site/y.html",
    ]
    for base in bases:
        for href in hrefs:
            assert resolve_cached(base, href) == resolve(base, href), (base, href)
