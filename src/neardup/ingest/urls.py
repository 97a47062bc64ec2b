"""URL helpers shared by the readers and the link extractor.

Link targets are compared across pages and hosts (mirror detection matches the link structure
of hosts), so every URL we store is absolute and lightly normalised the same way: lower-case
scheme and host, no default port, no fragment, "/" for an empty path. Nothing more aggressive
(no query sorting, no trailing-slash games), because that would merge distinct resources.

`resolve` runs for every link of every page, so it implements RFC 3986 §5.2 reference
resolution directly instead of calling `urllib.parse.urljoin`, which costs ~14 µs a call and
made link extraction slower than HTML parsing. Tests check it against urljoin and the RFC's
examples. Host/port normalisation goes through `urllib.parse` and is cached per authority.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from urllib.parse import urlsplit

_DEFAULT_PORTS = {"http": "80", "https": "443"}
_WEB_SCHEMES = frozenset(_DEFAULT_PORTS)
_TRIM = " \t\n\r\f\v\x00"
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.\-]*):")
# Browsers delete tabs and newlines anywhere in a URL (WHATWG URL standard).
_REMOVED = str.maketrans("", "", "\t\n\r")


def host_of(url: str | None) -> str | None:
    """Lower-case host name of `url` without port or user info, or None if it has none."""
    if not url:
        return None
    try:
        host = urlsplit(url.strip(_TRIM)).hostname
    except ValueError:
        return None
    if not host:
        return None
    return host.rstrip(".") or None


def normalize_url(url: str) -> str:
    """Lower-case scheme and host, drop the default port and the fragment.

    An http(s) URL with an empty path gets "/" (the same resource, RFC 3986 §6.2.3). Input
    that cannot be parsed is returned unchanged, minus surrounding whitespace.
    """
    url = url.strip(_TRIM)
    parts = _split(url)
    if parts is None:
        return url
    scheme, authority, path, query = parts
    if authority is None:
        return url.partition("#")[0]
    netloc = _authority(scheme, authority)
    if netloc is None:
        return url.partition("#")[0]
    if not path and scheme in _WEB_SCHEMES:
        path = "/"
    return _build(scheme, netloc, path, query)


def resolve(base: str | None, href: str | None) -> str | None:
    """Absolute, normalised http(s) URL for `href` found on a page at `base`.

    Returns None for hrefs that do not lead to a web page: javascript:, mailto:, data:, tel:,
    empty ones, and relative ones when there is no usable base to resolve them against.
    On a file:// page (an HTML folder read without a base URL) file:// targets are kept too.
    """
    if not href:
        return None
    ref = href.strip(_TRIM)
    if "\t" in ref or "\n" in ref or "\r" in ref:
        ref = ref.translate(_REMOVED)
    if not ref:
        return None
    if ":" in ref and _SCHEME.match(ref):
        target = _split(ref)
    else:
        base_parts = _base(base) if base else None
        if base_parts is None:
            return None
        target = _merge(base_parts, ref)
    if target is None:
        return None
    scheme, authority, path, query = target
    if scheme == "file" and base and base[:5].lower() == "file:":
        # Local HTML trees read without a base URL link to each other by file:// URLs.
        return _build("file", (authority or "").lower(), _remove_dot_segments(path), query)
    if scheme not in _WEB_SCHEMES or not authority:
        return None
    netloc = _authority(scheme, authority)
    if netloc is None:
        return None
    return _build(scheme, netloc, _remove_dot_segments(path) or "/", query)


def resolver(base: str | None) -> Callable[[str], str | None]:
    """`resolve` bound to one page's base and memoised across pages: pages of a site repeat
    their navigation links, and a reference with a path resolves the same against any base
    in the same directory. The base is parsed once per page, not once per link."""
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
    """Parsed base URL; cached because every link of a page shares it."""
    parts = _split(base.strip(_TRIM))
    if parts is None or parts[1] is None:
        return None
    return parts


def _merge(base: _Parts, ref: str) -> _Parts:
    """RFC 3986 §5.2.2 for a reference without scheme (dot segments are removed later)."""
    scheme, authority, base_path, base_query = base
    ref = ref.partition("#")[0]
    if ref.startswith("//"):
        parts = _split(f"{scheme}:{ref}")
        return parts if parts is not None else (scheme, None, "", None)
    path, sep, query = ref.partition("?")
    new_query = query if sep else None
    if not path:
        return scheme, authority, base_path, new_query if sep else base_query
    if path.startswith("/"):
        return scheme, authority, path, new_query
    if authority is not None and not base_path:
        return scheme, authority, "/" + path, new_query
    return scheme, authority, base_path[: base_path.rfind("/") + 1] + path, new_query


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4, with a fast exit for the usual path without dot segments."""
    if "." not in path or ("/." not in path and not path.startswith(".")):
        return path
    out: list[str] = []
    segments = path.split("/")
    for i, seg in enumerate(segments):
        last = i == len(segments) - 1
        if seg == ".":
            if last:
                out.append("")
        elif seg == "..":
            if len(out) > 1 or (out and out[0] != ""):
                out.pop()
            if last:
                out.append("")
        else:
            out.append(seg)
    result = "/".join(out)
    if path.startswith("/") and not result.startswith("/"):
        result = "/" + result
    return result


@lru_cache(maxsize=65536)
def _authority(scheme: str, authority: str) -> str | None:
    """user@host:port with the host lower-cased and a default port dropped; None if no host."""
    try:
        parts = urlsplit(f"{scheme}://{authority}/")
        host = parts.hostname
        port = parts.port
    except ValueError:
        return None
    if not host:
        return None
    userinfo, _, hostport = authority.rpartition("@")
    if hostport.startswith("["):
        host_text, _, rest = hostport.partition("]")
        host_text = host_text.lower() + "]"
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host_text, _, port_text = hostport.partition(":")
        host_text = host_text.lower()
    if port is None or _DEFAULT_PORTS.get(scheme) == str(port):
        port_text = ""
    netloc = f"{host_text}:{port_text}" if port_text else host_text
    return f"{userinfo}@{netloc}" if userinfo else netloc


def _build(scheme: str, netloc: str, path: str, query: str | None) -> str:
    """scheme://netloc/path?query."""
    url = f"{scheme}://{netloc}{path}"
    return f"{url}?{query}" if query is not None else url
