"""The made-up hosts of the demo crawl and their site templates.

All host names are under the reserved `.example` domain (RFC 2606), so nothing generated
can ever point at a real site.
"""

from __future__ import annotations

from neardup.synth.html import SiteTemplate

_NAV = (("Home", "/"), ("Library", "index.html"), ("Search", "search.html"))
_TAGLINE = "The reference for the standard library, generated from its docstrings."


def collection_sites(
    primary_host: str = "docs.pyref.example",
    mirror_host: str = "pyref-mirror.example",
    stale_host: str = "old-docs.example",
    partial_host: str = "partial-mirror.example",
    excerpt_host: str = "devnotes.example",
) -> dict[str, SiteTemplate]:
    """Templates of the hosts that serve (copies of) the documentation collection, by role.

    The primary and the stale copy share a layout and site name (an old deployment of the same
    site) but differ in version and date; the mirror, partial mirror and blog each have their
    own layout, so their pages differ from the primary in all boilerplate.
    """
    return {
        "primary": SiteTemplate(
            primary_host,
            "PyRef Documentation",
            "/3.11/library/",
            "3.11.7",
            "Mar 04, 2024",
            "sphinx",
            _TAGLINE,
            (*_NAV, ("Download", "/3.11/download.html"), ("Report a bug", "/bugs.html")),
            "Found a bug? Report it on the tracker.",
        ),
        "mirror": SiteTemplate(
            mirror_host,
            "PyRef Mirror Network",
            "/3.11/library/",
            "3.11.7",
            "Mar 04, 2024",
            "semantic",
            "Fast mirrors, updated nightly.",
            (("Mirrors", "/"), ("Status", "/status.html"), ("Contact", "/contact.html")),
            "Unofficial mirror.",
        ),
        "stale": SiteTemplate(
            stale_host,
            "PyRef Documentation",
            "/3.11/library/",
            "3.11.4",
            "Jun 06, 2023",
            "sphinx",
            _TAGLINE,
            (*_NAV, ("Download", "/3.11/download.html")),
            "This documentation is for an old release.",
        ),
        "partial": SiteTemplate(
            partial_host,
            "Docs Archive",
            "/mirrors/pyref/3.11/",
            "3.11.7",
            "Mar 02, 2024",
            "classic",
            "Manuals for offline reading.",
            (("Archive home", "/"), ("All manuals", "/mirrors/"), ("About", "/about.html")),
            "Missing pages link to the original.",
        ),
        "excerpt": SiteTemplate(
            excerpt_host,
            "Dev Notes",
            "/blog/",
            "2024",
            "Mar 06, 2024",
            "semantic",
            "Notes and snippets from a working programmer.",
            (("Posts", "/blog/"), ("Tags", "/tags/"), ("About me", "/about/")),
            "Quoted material remains the property of its authors.",
        ),
    }


def unrelated_sites() -> list[tuple[SiteTemplate, bool]]:
    """(template, gzip-encoded bodies) of hosts with unrelated pages.

    One declares ISO-8859-1 and one gzip-encodes its bodies, because real crawls do both and
    readers must undo them before any text is compared.
    """
    wiki = SiteTemplate(
        "wiki.codebase.example",
        "Codebase Wiki",
        "/wiki/",
        "r2291",
        "Feb 27, 2024",
        "semantic",
        "Team knowledge base.",
        (("Main page", "/wiki/"), ("Recent changes", "/wiki/recent.html")),
    )
    news = SiteTemplate(
        "news.techdaily.example",
        "Tech Daily",
        "/articles/",
        "edition 812",
        "Mar 05, 2024",
        "classic",
        "Software news every morning.",
        (("Front page", "/"), ("Archive", "/archive/"), ("Subscribe", "/subscribe")),
        charset="iso-8859-1",
    )
    forum = SiteTemplate(
        "forum.devtalk.example",
        "DevTalk Forum",
        "/t/",
        "4.2",
        "Mar 05, 2024",
        "sphinx",
        "Ask and answer programming questions.",
        (("Latest", "/latest"), ("Categories", "/categories"), ("FAQ", "/faq")),
    )
    return [(wiki, False), (news, False), (forum, True)]


def server_header(layout: str) -> str:
    """A plausible Server header per layout, so hosts look like different deployments."""
    return {"sphinx": "nginx/1.24.0", "semantic": "cloudflare", "classic": "Apache/2.4.57"}[layout]
