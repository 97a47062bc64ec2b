"""Render documents as realistic pages of a hyperlinked documentation site.

A near-duplicate detector must see what it sees on the web: per-site boilerplate (header,
navigation, footer with version and date) around a shared body, pages linking to each other,
scripts that are not text. Each host gets a `SiteTemplate`; the same document rendered with
two templates gives two pages that differ only in boilerplate, as a mirror does.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from html.parser import HTMLParser

from neardup.synth.corpus import Document

# Three layouts seen on real documentation sites: Sphinx-like, "modern" semantic, table-based.
LAYOUTS = ("sphinx", "semantic", "classic")


@dataclass(frozen=True)
class SiteTemplate:
    """The boilerplate a host wraps around every page, and where its pages live."""

    host: str
    site_name: str
    prefix: str  # URL path of the collection, starting and ending with "/"
    version: str
    updated: str  # human date shown in the footer, e.g. "Mar 01, 2024"
    layout: str = "sphinx"
    tagline: str = ""
    nav: tuple[tuple[str, str], ...] = ()  # (label, href) of the site's menu
    footer_note: str = ""
    scheme: str = "https"
    charset: str = "utf-8"  # declared in <meta> and the Content-Type header, used to encode

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {LAYOUTS}")
        if not (self.prefix.startswith("/") and self.prefix.endswith("/")):
            raise ValueError("prefix must start and end with '/'")

    @property
    def base_url(self) -> str:
        return f"{self.scheme}://{self.host}{self.prefix}"

    def url(self, page: str) -> str:
        """Absolute URL of a page file name (e.g. "json.html") in this collection."""
        return self.base_url + page


@dataclass(frozen=True)
class PageLinks:
    """Where a page links to: neighbours in reading order, the index, and related pages.

    Hrefs are given as the site writes them (relative file names within the collection, or
    absolute URLs when a partial mirror points back to the original).
    """

    index: str = "index.html"
    prev: tuple[str, str] | None = None  # (href, title)
    next: tuple[str, str] | None = None
    related: tuple[tuple[str, str], ...] = ()
    inline: dict[str, str] = field(default_factory=dict)  # title mentioned in text -> href


# A reST reference (:mod:`json`, `json.dumps()`) or a plain dotted/long name (email.message).
_REF = re.compile(
    r"(?P<role>:[a-z]+:)?`~?(?P<code>[A-Za-z_][\w.]*)(?P<call>\(\))?`"
    r"|\b(?P<word>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*)\b"
)


def _link_inline(text: str, inline: dict[str, str], budget: list[int], done: set[str]) -> str:
    """Link mentions of other pages' titles, as Sphinx does for cross-references.

    Code references become <code>, linked when they name a page; plain words are linked when
    they name a page and are distinctive (dotted, or 6+ characters), once per page. The text
    a reader sees is unchanged: only markup is added.
    """

    def repl(m: re.Match[str]) -> str:
        word = m.group("word")
        if word is not None:
            distinctive = "." in word or len(word) >= 6
            href = inline.get(word)
            if href is None or not distinctive or word in done or budget[0] <= 0:
                return word
            budget[0] -= 1
            done.add(word)
            return f'<a class="reference" href="{html.escape(href)}">{word}</a>'
        name = m.group("code")
        code = f"<code>{name}{m.group('call') or ''}</code>"
        href = inline.get(name)
        if href is None or budget[0] <= 0:
            return code
        budget[0] -= 1
        done.add(name)
        return f'<a class="reference" href="{html.escape(href)}">{code}</a>'

    return _REF.sub(repl, text)


def _body(doc: Document, links: PageLinks, max_inline: int = 12) -> list[str]:
    budget, done = [max_inline], set()
    out = [f"<h1>{html.escape(doc.title)}</h1>"]
    for section in doc.sections:
        if section.heading:
            anchor = re.sub(r"[^\w.]+", "-", section.heading).strip("-").lower()
            out.append(f'<h2 id="{anchor}">{html.escape(section.heading)}</h2>')
        for para in section.paragraphs:
            if "\n" in para:  # a code block keeps its lines (see corpus._paragraphs)
                out.append(f'<pre class="code">{html.escape(para, quote=False)}</pre>')
                continue
            out.append(
                f"<p>{_link_inline(html.escape(para, quote=False), links.inline, budget, done)}</p>"
            )
    if links.related:
        items = "".join(
            f'<li><a href="{html.escape(h)}">{html.escape(t)}</a></li>' for h, t in links.related
        )
        out.append(f'<div class="seealso"><p>See also:</p><ul>{items}</ul></div>')
    return out


def _nav(site: SiteTemplate) -> str:
    return "".join(
        f'<li><a href="{html.escape(href)}">{html.escape(label)}</a></li>'
        for label, href in site.nav
    )


def _pager(links: PageLinks) -> str:
    parts = []
    if links.prev:
        parts.append(
            f'<a rel="prev" href="{html.escape(links.prev[0])}">« {html.escape(links.prev[1])}</a>'
        )
    parts.append(f'<a href="{html.escape(links.index)}">Index</a>')
    if links.next:
        parts.append(
            f'<a rel="next" href="{html.escape(links.next[0])}">{html.escape(links.next[1])} »</a>'
        )
    return " | ".join(parts)


def _footer_text(site: SiteTemplate) -> str:
    note = f" {html.escape(site.footer_note)}" if site.footer_note else ""
    return (
        f"© {html.escape(site.site_name)}. Version {html.escape(site.version)}. "
        f"Last updated on {html.escape(site.updated)}.{note}"
    )


def _head(site: SiteTemplate, title: str) -> str:
    return (
        f'<head>\n<meta charset="{site.charset}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)} — {html.escape(site.site_name)} "
        f"{html.escape(site.version)}</title>\n"
        f'<link rel="stylesheet" href="{site.prefix}_static/site.css">\n'
        f"<script>window.SITE={{host:'{site.host}',version:'{site.version}'}};</script>\n"
        "</head>"
    )


def _wrap(site: SiteTemplate, title: str, body: list[str], links: PageLinks) -> str:
    """Put a body into the site's layout."""
    main = "\n".join(body)
    tagline = f'<p class="tagline">{html.escape(site.tagline)}</p>' if site.tagline else ""
    if site.layout == "sphinx":
        page = (
            f'<div class="related" role="navigation"><ul>{_nav(site)}</ul>'
            f'<p class="pager">{_pager(links)}</p></div>\n'
            f'<div class="document"><div class="body" role="main">\n{main}\n</div>'
            f'<div class="sphinxsidebar"><h3>{html.escape(site.site_name)}</h3>{tagline}'
            f'<form class="search" action="{site.prefix}search.html"><input name="q"></form>'
            "</div></div>\n"
            f'<div class="footer">{_footer_text(site)}</div>'
        )
    elif site.layout == "semantic":
        page = (
            f'<header class="site-header"><a class="brand" href="/">'
            f"{html.escape(site.site_name)}</a>"
            f"{tagline}<nav><ul>{_nav(site)}</ul></nav></header>\n"
            f'<main><article>\n{main}\n</article><nav class="pager">{_pager(links)}</nav></main>\n'
            f"<footer><p>{_footer_text(site)}</p></footer>"
        )
    else:
        page = (
            f'<table class="layout" width="100%"><tr><td colspan="2" class="banner">'
            f"<b>{html.escape(site.site_name)}</b> {tagline}</td></tr>\n"
            f'<tr><td class="menu" valign="top"><ul>{_nav(site)}</ul></td>'
            f'<td class="content">\n{main}\n<hr><p>{_pager(links)}</p></td></tr>\n'
            f'<tr><td colspan="2" class="footer"><small>{_footer_text(site)}</small></td></tr>'
            "</table>"
        )
    head = _head(site, title)
    return f'<!DOCTYPE html>\n<html lang="en">\n{head}\n<body>\n{page}\n</body>\n</html>\n'


def render_page(site: SiteTemplate, doc: Document, links: PageLinks) -> str:
    """The full HTML of `doc` as a page of `site`, linking to `links`."""
    return _wrap(site, doc.title, _body(doc, links), links)


def render_index(site: SiteTemplate, entries: list[tuple[str, str]], title: str = "Index") -> str:
    """The collection's index page: a list of (href, title) links to every page."""
    items = "\n".join(
        f'<li><a href="{html.escape(h)}">{html.escape(t)}</a></li>' for h, t in entries
    )
    body = [f"<h1>{html.escape(title)}</h1>", f'<ul class="toctree">\n{items}\n</ul>']
    return _wrap(site, title, body, PageLinks())


def render_error_page(site: SiteTemplate, status: int, reason: str, url: str) -> str:
    """An error page (e.g. 404) in the site's layout, as real servers send with the status."""
    body = [
        f"<h1>{status} {html.escape(reason)}</h1>",
        f"<p>The requested URL {html.escape(url)} was not found on this server. "
        "It may have been moved or deleted; try the index or the search page.</p>",
    ]
    return _wrap(site, f"{status} {reason}", body, PageLinks())


def render_redirect_page(location: str) -> str:
    """The short body servers send with a 301, pointing to `location`."""
    loc = html.escape(location)
    return (
        "<!DOCTYPE html>\n<html><head><title>301 Moved Permanently</title></head>\n"
        f'<body><h1>Moved Permanently</h1><p>The document has moved <a href="{loc}">here</a>.</p>'
        "</body></html>\n"
    )


class _TextExtractor(HTMLParser):
    _SKIP = frozenset({"script", "style", "head", "title"})
    _BLOCK = frozenset(
        {
            "p",
            "div",
            "h1",
            "h2",
            "h3",
            "li",
            "ul",
            "tr",
            "td",
            "header",
            "footer",
            "nav",
            "br",
            "hr",
        }
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in self._SKIP:
            self.depth += 1
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self.depth = max(self.depth - 1, 0)
        elif tag in self._BLOCK:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.depth:
            self.parts.append(data)


def visible_text(page_html: str) -> str:
    """The text a reader sees (no head, scripts or styles), one block per line.

    A deliberately plain extractor for the text-table writers and for tests; the pipeline
    has its own.
    """
    parser = _TextExtractor()
    parser.feed(page_html)
    parser.close()
    lines = (" ".join(line.split()) for line in "".join(parser.parts).splitlines())
    return "\n".join(line for line in lines if line)
