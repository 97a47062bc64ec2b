"""A crawl file with what a real crawl carries beside its pages: the crawler's own files,
error pages, redirects and pages a URL pattern is meant to leave out.

Written through `neardup.synth.writers.write_warc` (warcio; a warcinfo, then a response and
its request per fetch, linked by WARC-Concurrent-To). Every group of files below would form
a cluster if it were compared: robots.txt of six hosts with one text, the same security.txt
on two hosts, the same "not found" page on three hosts, printable copies of an article; so a
test that finds none of them clustered shows the rule at work, not an accident of the data.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from html import escape
from pathlib import Path
from typing import Any

from neardup.synth.corpus import stdlib_documents
from neardup.synth.writers import CrawlRecord, write_warc

HOSTS = [f"https://www.site{i}.example" for i in range(6)]
ROBOTS = (
    "# robots.txt for this site\nUser-agent: *\nDisallow: /cgi-bin/\nDisallow: /tmp/\n"
    "Disallow: /private/\nDisallow: /search\nAllow: /search/about\nCrawl-delay: 10\n"
    "User-agent: BadBot\nDisallow: /\n"
)
SECURITY = (
    "Contact: mailto:security@example.org\nExpires: 2026-12-31T23:00:00.000Z\n"
    "Preferred-Languages: en, de\nCanonical: https://example.org/.well-known/security.txt\n"
    "Policy: https://example.org/security-policy\nHiring: https://example.org/jobs\n"
)
SITEMAP = (
    '<?xml version="1.0" encoding="UTF-8"?>\n'
    '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
    + "".join(
        f"<url><loc>https://www.example.org/p/{i}</loc><lastmod>2024-05-0{i}</lastmod></url>\n"
        for i in range(1, 8)
    )
    + "</urlset>\n"
)
NOT_FOUND = (
    "<html><head><title>Page not found</title></head><body><h1>Page not found</h1>"
    "<p>We are sorry, but the page you were looking for could not be found on this server. "
    "It may have been moved or deleted, or the address may have been typed wrongly. Please "
    "check the spelling, go back to the home page, or use the search box above to find what "
    "you were looking for. If you followed a link from another site, let its owner know.</p>"
    "</body></html>"
)


def _html(title: str, paragraphs: list[str]) -> str:
    body = "".join(f"<p>{escape(p)}</p>" for p in paragraphs)
    head = escape(title)
    return f"<html><head><title>{head}</title></head><body><h1>{head}</h1>{body}</body></html>"


def artefact_records() -> list[CrawlRecord]:
    """The fetches, in crawl order (robots.txt of a host first, as a polite crawler does)."""
    docs = stdlib_documents(min_words=200, limit=3)
    t = datetime(2024, 5, 18, 1, 0, tzinfo=timezone.utc)
    out: list[CrawlRecord] = []

    def fetch(url: str, body: str, **kw: Any) -> None:
        out.append(CrawlRecord(url, t + timedelta(seconds=len(out)), body=body.encode(), **kw))

    for host in HOSTS:
        fetch(f"{host}/robots.txt", ROBOTS, content_type="text/plain")
    fetch("https://www.site6.example/robots.txt", NOT_FOUND, status=404, reason="Not Found")
    for host in HOSTS[:2]:
        fetch(f"{host}/.well-known/security.txt", SECURITY, content_type="text/plain")
        fetch(f"{host}/sitemap.xml", SITEMAP, content_type="text/xml")
    for host in HOSTS[:3]:
        fetch(f"{host}/no/such/page.html", NOT_FOUND, status=404, reason="Not Found")
    fetch(
        "http://www.site0.example/",
        "",
        status=301,
        reason="Moved Permanently",
        location="https://www.site0.example/",
    )
    # An article and its copy on another host (a cluster the rule keeps), and its printable
    # versions (a cluster an exclude pattern removes).
    article = _html(docs[0].title, docs[0].paragraphs)
    fetch(f"{HOSTS[0]}/news/article-1.html", article)
    fetch(f"{HOSTS[1]}/mirror/article-1.html", article)
    printable = _html(docs[1].title, docs[1].paragraphs)
    fetch(f"{HOSTS[2]}/print/article-2.html", printable)
    fetch(f"{HOSTS[3]}/print/article-2.html", printable)
    fetch(f"{HOSTS[4]}/about.html", _html(docs[2].title, docs[2].paragraphs))
    return out


def write_artefact_warc(folder: Path) -> Path:
    """The crawl file `folder/artefacts.warc.gz`."""
    path = folder / "artefacts.warc.gz"
    write_warc(path, artefact_records(), info={"description": "crawler files and error pages"})
    return path
