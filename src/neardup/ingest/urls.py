"""URL helpers shared by the readers and the link extractor.

Link targets are compared across pages and hosts (mirror detection groups pages by host and
matches their link structure), so every URL we store is absolute and lightly normalised the same
way: lower-case scheme and host, no default port, no fragment. Nothing more aggressive
(no query sorting, no trailing-slash games) because that would merge distinct resources.
"""

from __future__ import annotations

from urllib.parse import SplitResult, urljoin, urlsplit, urlunsplit

_DEFAULT_PORTS = {"http": 80, "https": 443}
_WEB_SCHEMES = frozenset(_DEFAULT_PORTS)
# Browsers drop these from URLs before resolving them (WHATWG URL standard).
_STRIP_CHARS = "\t\n\r"
_TRIM = " \t\n\r\f\v\x00"


def _split(url: str) -> SplitResult | None:
    """urlsplit that returns None instead of raising on malformed input (bad IPv6 brackets)."""
    try:
        return urlsplit(url)
    except ValueError:
        return None


def _port(parts: SplitResult) -> int | None:
    """The explicit port, or None when absent or not a valid number."""
    try:
        return parts.port
    except ValueError:
        return None


def host_of(url: str | None) -> str | None:
    """Lower-case host name of `url` without port or user info, or None if it has none."""
    if not url:
        return None
    parts = _split(url.strip(_TRIM))
    if parts is None:
        return None
    try:
        host = parts.hostname
    except ValueError:
        return None
    if not host:
        return None
    return host.rstrip(".") or None


def normalize_url(url: str) -> str:
    """Lower-case scheme and host, drop the default port and the fragment.

    An http(s) URL with an empty path gets "/" (the same resource per RFC 3986 §6.2.3).
    Input that cannot be parsed is returned unchanged, minus surrounding whitespace.
    """
    url = url.strip(_TRIM)
    parts = _split(url)
    if parts is None or not parts.netloc:
        return url
    scheme = parts.scheme.lower()
    netloc = _normalize_netloc(parts, scheme)
    path = parts.path
    if not path and scheme in _WEB_SCHEMES:
        path = "/"
    return urlunsplit((scheme, netloc, path, parts.query, ""))


def _normalize_netloc(parts: SplitResult, scheme: str) -> str:
    """Rebuild user-info@host:port with the host lower-cased and a default port dropped."""
    netloc = parts.netloc
    userinfo, _, hostport = netloc.rpartition("@")
    port = _port(parts)
    if hostport.startswith("["):  # IPv6 literal: keep the brackets
        host, _, rest = hostport.partition("]")
        host = host + "]"
        port_text = rest[1:] if rest.startswith(":") else ""
    else:
        host, _, port_text = hostport.partition(":")
    host = host.lower()
    if port is not None and _DEFAULT_PORTS.get(scheme) == port:
        port_text = ""  # an unparsable port is kept as written rather than guessed at
    out = host + (":" + port_text if port_text else "")
    return f"{userinfo}@{out}" if userinfo else out


def resolve(base: str | None, href: str | None) -> str | None:
    """Absolute, normalised http(s) URL for `href` found on a page at `base`.

    Returns None for hrefs that do not lead to a web page: javascript:, mailto:, data:, tel:,
    empty ones, and relative ones when there is no base to resolve them against.
    """
    if href is None:
        return None
    href = href.strip(_TRIM)
    for ch in _STRIP_CHARS:
        href = href.replace(ch, "")
    if not href:
        return None
    try:
        joined = urljoin(base, href) if base else href
    except ValueError:
        return None
    parts = _split(joined)
    if parts is None or parts.scheme.lower() not in _WEB_SCHEMES or not parts.hostname:
        return None
    return normalize_url(joined)
