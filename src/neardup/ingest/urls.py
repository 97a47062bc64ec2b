"""The one URL identity: pages, link targets, redirect targets, mirrors and the service.

A link must meet the page it points to, so every URL neardup compares is parsed the way a
browser parses it, by the WHATWG URL standard, through ada (`can-ada`, the ada C++ parser
behind Node.js, bound with nanobind): scheme and host lower-cased, international host names
as punycode, the default port dropped, dot segments removed (`%2e` too), backslashes read as
slashes, characters outside the URL code points percent-encoded, "/" for an empty http(s)
path. On top of that, neardup drops the fragment (it names a place in the same page).
Nothing more aggressive (no query sorting, no trailing-slash games), because that would
merge distinct resources. `http://Host:80/a/../b#x` is `http://host/b`.

Why can-ada and not `ada-url`, the ada project's own binding: a parse costs about 0.7 µs
with can-ada and 4–7 µs through ada-url's cffi layer, and link resolution runs for every link
of every page (it once cost more than HTML parsing). can-ada has no "parse against a base",
so a relative reference is first merged with its base as a string (RFC 3986 §5.2.2, with
WHATWG's two differences for special schemes: `\\` is `/`, and `http:g` is relative), and
the merged URL is then parsed; the tests check the result against ada-url's `join_url`.
ada-url also re-parses the rare path that can-ada's bundled ada leaves a dot segment in.
Results are memoised per page directory (`resolver`), as pages of a site repeat their
navigation links.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import ada_url
import can_ada

_WEB_SCHEMES = frozenset({"http", "https"})
_SPECIAL = frozenset({"http", "https", "ftp", "ws", "wss", "file"})
_TRIM = " \t\n\r\f\v\x00"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# Browsers delete tabs and newlines anywhere in a URL (WHATWG URL standard).
_REMOVED = str.maketrans("", "", "\t\n\r")


def _href(url: str) -> str | None:
    """The WHATWG serialisation of an absolute URL, or None when it is not a valid URL.

    can-ada 3.0 bundles an ada version that leaves a final dot segment after an earlier
    segment starting with a dot (`/a/.a/.` stays, `/a/.a/` is right); the rare path that
    still holds a dot segment is parsed again by ada-url, the ada project's own binding.
    """
    try:
        parsed = can_ada.parse(url)
    except ValueError:
        return None
    return _parsed_href(url, parsed)


def _parsed_href(url: str, parsed: Any) -> str | None:
    """`_href` of `url`, which can-ada parsed into `parsed`."""
    href = parsed.href
    if "/." in href:
        path = parsed.pathname
        if "/." in path and (path.endswith(("/.", "/..")) or "/./" in path or "/../" in path):
            try:
                return ada_url.URL(url).href
            except ValueError:
                return None
    return href


def host_of(url: str | None) -> str | None:
    """Host of `url` as the URL identity writes it (lower case, punycode, no port, no user
    info, no trailing dot, IPv6 without brackets), or None if it has none."""
    if not url:
        return None
    try:
        host = can_ada.parse(url.strip(_TRIM)).hostname
    except ValueError:
        return None
    return _bare_host(host)


def _bare_host(host: str) -> str | None:
    if host.startswith("["):
        host = host[1:-1]
    return host.rstrip(".") or None


def identity_and_host(url: str) -> tuple[str, str | None]:
    """`normalize_url(url)` and `host_of(url)` from one parse of the URL: the ingest
    writes both for every record."""
    url = url.strip(_TRIM)
    try:
        parsed = can_ada.parse(url)
    except ValueError:
        return url, None
    return _identity(url, _parsed_href(url, parsed)), _bare_host(parsed.hostname)


def _identity(url: str, href: str | None) -> str:
    """A stripped URL's identity from its serialisation `href` (None: not a valid URL, which
    is its own identity): the serialisation without its fragment."""
    return url if href is None else href.partition("#")[0]


def normalize_url(url: str) -> str:
    """The URL's identity (see the module docstring): exactly what `resolve` writes for a
    link to it, so that a page's URL and a link to the page meet.

    Input that is not a valid URL is returned unchanged, minus surrounding whitespace.
    """
    url = url.strip(_TRIM)
    return _identity(url, _href(url))


def resolve(base: str | None, href: str | None) -> str | None:
    """Absolute http(s) URL identity for `href` found on a page at `base`.

    Returns None for hrefs that do not lead to a web page: javascript:, mailto:, data:, tel:,
    empty or invalid ones, and relative ones when there is no usable base to resolve them
    against. On a file:// page (an HTML folder read without a base URL) file:// targets are
    kept too.
    """
    if not href:
        return None
    ref = href.strip(_TRIM)
    if "\t" in ref or "\n" in ref or "\r" in ref:
        ref = ref.translate(_REMOVED)
    if not ref:
        return None
    absolute = _absolute(base, ref)
    if absolute is None:
        return None
    href = _href(absolute)
    if href is None:
        return None
    # A `#` outside the fragment is always percent-encoded; a valid http(s) URL has a host.
    scheme = href[: href.find(":")]
    if scheme in _WEB_SCHEMES or (scheme == "file" and base and base[:5].lower() == "file:"):
        return href.partition("#")[0]
    return None


def resolver(base: str | None) -> Callable[[str], str | None]:
    """`resolve` bound to one page's base and memoised across pages: pages of a site repeat
    their navigation links, and a reference with a path resolves the same against any base
    in the same directory. The base is parsed once per page, not once per link."""
    if base:
        href = _href(base.strip(_TRIM))
        base = href.partition("#")[0] if href is not None else None
    parts = _base(base) if base else None
    if parts is None:
        return lambda href: resolve(base, href)
    scheme, authority, path, _ = parts
    directory = path[: path.rfind("/") + 1]
    authority = authority or ""

    def resolve_one(href: str) -> str | None:
        if not href or href[0] in "?#":
            return resolve(base, href)
        return _resolve_in_directory(scheme, authority, directory, href)

    return resolve_one


def resolve_cached(base: str | None, href: str) -> str | None:
    """`resolve` through the shared cache (see `resolver`)."""
    return resolver(base)(href)


@lru_cache(maxsize=1 << 16)
def _resolve_in_directory(scheme: str, authority: str, directory: str, href: str) -> str | None:
    return resolve(f"{scheme}://{authority}{directory}", href)


_Parts = tuple[str, "str | None", str, "str | None"]  # scheme, authority, path, query


def _absolute(base: str | None, ref: str) -> str | None:
    """`ref` as an absolute URL string, merged with `base` when it is relative."""
    m = _SCHEME.match(ref)
    base_parts = _base(base) if base else None
    if m is not None:
        scheme = m.group(1).lower()
        rest = ref[m.end() :]
        # WHATWG: "http:g" (or "http:/g") on an http page is relative, like "g"; only
        # "http://" starts an authority (special schemes only).
        same_special = base_parts is not None and scheme == base_parts[0] and scheme in _SPECIAL
        if not (same_special and not rest.startswith("//")):
            return ref
        ref = rest
    if base_parts is None:
        return None
    return _merge(base_parts, _slashes(base_parts[0], ref))


def _slashes(scheme: str, ref: str) -> str:
    """WHATWG reads `\\` as `/` before the query of a special-scheme URL."""
    if scheme not in _SPECIAL or "\\" not in ref:
        return ref
    cut = len(ref)
    for sep in "?#":
        i = ref.find(sep)
        if i != -1 and i < cut:
            cut = i
    return ref[:cut].replace("\\", "/") + ref[cut:]


def _split(url: str) -> _Parts | None:
    """Scheme (lower case), authority, path, query of an absolute URL; fragment dropped."""
    m = _SCHEME.match(url)
    if m is None:
        return None
    scheme = m.group(1).lower()
    rest = url[m.end() :].partition("#")[0]
    authority = None
    if rest.startswith("//"):
        rest = rest[2:]
        end = len(rest)
        for sep in "/?":
            i = rest.find(sep)
            if i != -1 and i < end:
                end = i
        authority, rest = rest[:end], rest[end:]
    path, sep, query = rest.partition("?")
    return scheme, authority, path, (query if sep else None)


@lru_cache(maxsize=4096)
def _base(base: str) -> _Parts | None:
    """Parsed base URL (already a URL identity); cached because every link of a page shares
    it."""
    parts = _split(base.strip(_TRIM))
    if parts is None or parts[1] is None:
        return None
    return parts


def _merge(base: _Parts, ref: str) -> str:
    """RFC 3986 §5.2.2 for a reference without scheme, as a string; the WHATWG parse that
    follows removes dot segments and normalises the rest."""
    scheme, authority, base_path, base_query = base
    ref = ref.partition("#")[0]
    if ref.startswith("//"):
        return f"{scheme}:{ref}"
    path, sep, query = ref.partition("?")
    if not path:
        query_part = f"?{query}" if sep else (f"?{base_query}" if base_query is not None else "")
        return f"{scheme}://{authority or ''}{base_path}{query_part}"
    query_part = f"?{query}" if sep else ""
    if not path.startswith("/"):
        if authority is not None and not base_path:
            path = "/" + path
        else:
            path = base_path[: base_path.rfind("/") + 1] + path
    return f"{scheme}://{authority or ''}{path}{query_part}"
