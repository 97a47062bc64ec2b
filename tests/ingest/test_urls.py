"""URL identity: our resolver must agree with the RFC, with urllib on ordinary URLs, and with
ada's own WHATWG join (the ada-url binding, an independent implementation of the merge)."""

from __future__ import annotations

from urllib.parse import urljoin

import ada_url
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.ingest.urls import host_of, identity_and_host, normalize_url, resolve

RFC_BASE = "http://a/b/c/d;p?q"
# RFC 3986 §5.4.1 and §5.4.2, with our normalisation ("/" for an empty path, no fragment).
RFC_EXAMPLES = {
    "g": "http://a/b/c/g",
    "./g": "http://a/b/c/g",
    "g/": "http://a/b/c/g/",
    "/g": "http://a/g",
    "//g": "http://g/",
    "?y": "http://a/b/c/d;p?y",
    "g?y": "http://a/b/c/g?y",
    "#s": "http://a/b/c/d;p?q",
    "g#s": "http://a/b/c/g",
    ";x": "http://a/b/c/;x",
    "g;x?y#s": "http://a/b/c/g;x?y",
    ".": "http://a/b/c/",
    "..": "http://a/b/",
    "../g": "http://a/b/g",
    "../..": "http://a/",
    "../../g": "http://a/g",
    "../../../../g": "http://a/g",
    "/./g": "http://a/g",
    "/../g": "http://a/g",
    "g.": "http://a/b/c/g.",
    "..g": "http://a/b/c/..g",
    "./../g": "http://a/b/g",
    "./g/.": "http://a/b/c/g/",
    "g/./h": "http://a/b/c/g/h",
    "g/../h": "http://a/b/c/h",
    "g;x=1/../y": "http://a/b/c/y",
    "g?y/../x": "http://a/b/c/g?y/../x",
    "g#s/../x": "http://a/b/c/g",
}


@pytest.mark.parametrize(("ref", "expected"), RFC_EXAMPLES.items())
def test_rfc3986_examples(ref: str, expected: str) -> None:
    assert resolve(RFC_BASE, ref) == expected


@pytest.mark.parametrize(
    "base",
    ["http://Example.COM:80/a/b/c.html?x=1", "https://ex.com", "http://u:p@ex.com:8080/p/q"],
)
@pytest.mark.parametrize(
    "ref",
    [
        "x.html",
        "../up.html",
        "/abs",
        "//other.org/p",
        "?q=2",
        "./a/./b/../c",
        "%7Euser/",
        "HTTPS://Foo.Bar:443/x#y",
        "http://[::1]:80/x",
    ],
)
def test_agrees_with_urljoin(base: str, ref: str) -> None:
    assert resolve(base, ref) == normalize_url(urljoin(base, ref))


@pytest.mark.parametrize(
    "href",
    [
        "javascript:void(0)",
        "mailto:a@b.org",
        " data:text/plain,x",
        "tel:123",
        "ftp://a/b",
        "",
        "   ",
        "http://[::1/x",
        "http://a.example:port/x",
        "http://exa mple.com/",
    ],
)
def test_not_a_web_link(href: str) -> None:
    assert resolve("http://example.com/", href) is None


def test_relative_without_base() -> None:
    assert resolve(None, "x.html") is None
    assert resolve(None, "http://Example.com") == "http://example.com/"


def test_browser_whitespace_rules() -> None:
    assert resolve("http://e.com/d/", "  \tfo\no.html \n") == "http://e.com/d/foo.html"


def test_file_urls_only_from_file_pages() -> None:
    assert resolve("file:///site/a/index.html", "../b.html") == "file:///site/b.html"
    assert resolve("http://e.com/", "file:///etc/passwd") is None


def test_normalize_url() -> None:
    assert normalize_url("HTTP://User@WWW.Example.COM:80/Path?Q=1#frag") == (
        "http://User@www.example.com/Path?Q=1"
    )
    assert normalize_url("https://e.com:8443") == "https://e.com:8443/"
    assert normalize_url(" mailto:x@y#z ") == "mailto:x@y"
    assert normalize_url("not a url") == "not a url"


def test_host_of() -> None:
    assert host_of("http://User:pw@WWW.Example.com.:8080/x") == "www.example.com"
    assert host_of("https://[2001:db8::1]:443/") == "2001:db8::1"
    assert host_of("dns:example.com") is None
    assert host_of("http://[::1/") is None
    assert host_of(None) is None


WHATWG_BASES = [
    "http://Example.COM:80/a/b/c.html?x=1#f",
    "https://ex.com",
    "http://u:p@ex.com:8080/p/q/",
    "https://b\u00fccher.example/d/e",
]
WHATWG_REFS = [
    "http:g",  # same special scheme without slashes: relative in browsers
    "https:g",
    "http:/g",
    "http:///nohost",  # browsers skip the extra slashes
    "\\\\other.org\\x",  # backslashes are slashes in special URLs
    "a\\b/..\\c?q\\r",
    "%2e%2E/up",
    "a b/c\u00e9?q r",
    "//B\u00dcCHER.example:443/x",
    "/a/./b/../../c",
    ".a/.",  # can-ada 3.0 alone keeps the last "." here
    ".a/./x/..",
    "?",
    "#only",
    "x?y#z/../w",
    "HTTP://Host:80/a/../b#x",
]


@pytest.mark.parametrize("base", WHATWG_BASES)
@pytest.mark.parametrize("ref", WHATWG_REFS)
def test_agrees_with_whatwg_join(base: str, ref: str) -> None:
    expected = ada_url.join_url(base, ref).partition("#")[0]
    assert resolve(base, ref) == expected


@settings(max_examples=300, deadline=None)
@given(
    base=st.sampled_from(["http://Ex.org/d1/d2/page?q", "http://x.org/.a/b"]),
    ref=st.text(alphabet="ab./\\?#%2e:Hh", max_size=14),
)
def test_agrees_with_whatwg_join_on_generated_refs(base: str, ref: str) -> None:
    if not ref.strip():
        assert resolve(base, ref) is None  # an empty href is no link
        return
    try:
        joined = ada_url.join_url(base, ref)
    except ValueError:
        assert resolve(base, ref) is None
        return
    expected = joined.partition("#")[0]
    if not expected.startswith(("http://", "https://")):
        assert resolve(base, ref) is None
    else:
        assert resolve(base, ref) == expected


def test_pages_and_links_share_one_identity() -> None:
    page = normalize_url("http://HOST:80/b#frag")
    assert page == "http://host/b"
    for href in ("http://Host:80/a/../b#x", "../b", "/a/%2e%2e/b", "\\b"):
        assert resolve("http://host/a/c.html", href) == page, href
    assert normalize_url("http://B\u00fccher.Example/") == "http://xn--bcher-kva.example/"
    assert host_of("http://B\u00fccher.Example./") == "xn--bcher-kva.example"


@given(
    st.one_of(
        st.text(alphabet="htps:/[]@.:80aA\u00fcB\\?#%2e \t", max_size=24),
        st.builds(
            "".join,
            st.lists(
                st.sampled_from(
                    [
                        "http://",
                        "HTTPS://",
                        "dns:",
                        "u:p@",
                        "WWW.Ex.org.",
                        "[::1]",
                        ":8080",
                        "/a/../b",
                        "/.a/.",
                        "?q#f",
                        " ",
                        "\t",
                        "B\u00fccher",
                        "/",
                    ]
                ),
                max_size=7,
            ),
        ),
    )
)
def test_identity_and_host_from_one_parse_are_the_two_functions(url: str) -> None:
    """The ingest's one parse per record gives what `normalize_url` and `host_of` give."""
    assert identity_and_host(url) == (normalize_url(url), host_of(url))
