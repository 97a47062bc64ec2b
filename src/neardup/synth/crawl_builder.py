"""How a `SyntheticCrawl` is built: every site of its topology, record by record.

The topology itself is described in `crawl.py`; this module renders each site's pages, states
the truth of each record, and schedules the fetches into WARC files and days.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import numpy as np

from neardup.synth.bodies import gzip_bytes, tiny_png
from neardup.synth.corpus import Document, stdlib_documents
from neardup.synth.edits import edit_document, truncate_document
from neardup.synth.html import (
    PageLinks,
    SiteTemplate,
    render_error_page,
    render_index,
    render_page,
    render_redirect_page,
)
from neardup.synth.sites import collection_sites, server_header, unrelated_sites
from neardup.synth.writers import CrawlRecord, payload_digest

if TYPE_CHECKING:
    from neardup.synth.crawl import SyntheticCrawl

CRAWL_START = datetime(2024, 3, 5, 6, 0, 0, tzinfo=timezone.utc)
COLLECTION = "pyref"
INDEX_ID = "index:pyref"  # `original` of the collection's index pages
EXACT_PREFIX = "/latest/library/"


def _corpus(need: int, min_words: int) -> tuple[list[Document], int]:
    """At least `need` documents, preferring pages of `min_words` words or more.

    Newer Pythons drop stdlib modules (3.13 has about 10 % fewer pages than 3.11), so the
    length floor is relaxed step by step before giving up.
    """
    floors = [min_words] + [w for w in (120, 100, 80, 60, 40) if w < min_words]
    for floor in floors:
        docs = stdlib_documents(min_words=floor)
        if len(docs) >= need:
            return docs, floor
    raise ValueError(
        f"the demo crawl needs {need} source documents and this Python's standard library "
        f"gives {len(docs)}: ask for {need - len(docs)} fewer pages (--pages)"
    )


class _IpPool:
    """Stable documentation-range IP addresses per host (RFC 5737)."""

    _NETS = ("192.0.2", "198.51.100", "203.0.113")

    def __init__(self) -> None:
        self.ips: dict[str, str] = {}

    def get(self, host: str) -> str:
        if host not in self.ips:
            k = len(self.ips)
            self.ips[host] = f"{self._NETS[k % 3]}.{10 + k}"
        return self.ips[host]


class _Builder:
    """One build of a `SyntheticCrawl`: the shared state of its steps."""

    def __init__(self, spec: SyntheticCrawl) -> None:
        self.spec = spec
        self.rng = np.random.default_rng(spec.seed)
        need = spec.n_docs + spec.n_unrelated
        corpus, self.min_words = _corpus(need, spec.min_words)
        order = self.rng.permutation(len(corpus))[:need]
        self.docs = [corpus[i] for i in sorted(order[: spec.n_docs])]
        self.others = [corpus[i] for i in sorted(order[spec.n_docs :])]
        self.n = len(self.docs)
        self.names = [f"{d.slug}.html" for d in self.docs]
        self.titles = [d.title for d in self.docs]
        self.sites = collection_sites()
        self.primary = self.sites["primary"]
        self.primary_url = [self.primary.url(name) for name in self.names]
        # The collection's link graph, shared by every copy of it.
        others = [np.delete(np.arange(self.n), i) for i in range(self.n)]
        k = min(3, self.n - 1)
        self.related = [tuple(int(j) for j in self.rng.choice(o, k, replace=False)) for o in others]
        self.records: list[CrawlRecord] = []
        self.ips = _IpPool()
        self.primary_html: list[str] = []
        self.topology: dict[str, Any] = {}

    # -- helpers --------------------------------------------------------------------------

    def links(self, i: int, href: Callable[[int | None], str]) -> PageLinks:
        n, titles = self.n, self.titles
        return PageLinks(
            index=href(None),
            prev=(href(i - 1), titles[i - 1]) if i > 0 else None,
            next=(href(i + 1), titles[i + 1]) if i + 1 < n else None,
            related=tuple((href(j), titles[j]) for j in self.related[i]),
            inline={t: href(j) for j, t in enumerate(titles) if j != i},
        )

    def local(self, i: int | None) -> str:
        return "index.html" if i is None else self.names[i]

    def pick(self, k: int) -> list[int]:
        return sorted(int(i) for i in self.rng.choice(self.n, min(k, self.n), replace=False))

    def add(
        self, site: SiteTemplate, path: str, html: str, file: int, role: str, **truth: Any
    ) -> CrawlRecord:
        rec = CrawlRecord(
            url=f"{site.scheme}://{site.host}{path}",
            fetched_at=CRAWL_START,
            body=html.encode(site.charset, errors="xmlcharrefreplace"),
            ip=self.ips.get(site.host),
            server=server_header(site.layout),
            warc_file=file,
            role=role,
            **{"content_type": f"text/html; charset={site.charset}", **truth},
        )
        self.records.append(rec)
        return rec

    def add_copy(
        self,
        site: SiteTemplate,
        path: str,
        html: str,
        file: int,
        role: str,
        i: int | None,
        edit: str,
        collection: str | None = COLLECTION,
    ) -> CrawlRecord:
        """A copy of document `i` (the index when `i` is None), with its truth."""
        original = INDEX_ID if i is None else self.docs[i].doc_id
        primary = self.primary.url("index.html") if i is None else self.primary_url[i]
        return self.add(
            site,
            path,
            html,
            file,
            role,
            original=original,
            edit=edit,
            collection=collection,
            primary_url=primary,
        )

    # -- steps ------------------------------------------------------------------------------

    def run(self) -> list[CrawlRecord]:
        self.primary_site()
        self.mirror_site()
        self.stale_site()
        self.partial_site()
        self.excerpts()
        self.unrelated()
        self.skipped()
        self.topology.update(
            seed=self.spec.seed,
            documents=self.n,
            min_words=self.min_words,
            hosts={
                role: {"host": s.host, "prefix": s.prefix, "version": s.version}
                for role, s in self.sites.items()
            },
            alias_host="www." + self.primary.host,
            exact_prefix=EXACT_PREFIX,
            unrelated_hosts=[s.host for s, _ in unrelated_sites()],
            excerpt_keep=self.spec.excerpt_keep,
        )
        return _schedule(self.records, self.rng)

    def primary_site(self) -> None:
        """Host A (file 0): the collection and its index, plus alias and exact copies."""
        site = self.primary
        for i, doc in enumerate(self.docs):
            html = render_page(site, doc, self.links(i, self.local))
            self.primary_html.append(html)
            self.add_copy(site, site.prefix + self.names[i], html, 0, "primary", i, "none")
        entries = [(self.names[i], self.titles[i]) for i in range(self.n)]
        index = render_index(site, entries)
        self.add_copy(site, site.prefix + "index.html", index, 0, "primary-index", None, "none")
        alias = SiteTemplate(**{**site.__dict__, "host": "www." + site.host})
        for i in self.pick(self.spec.alias_pages):
            path = alias.prefix + self.names[i]
            self.add_copy(alias, path, self.primary_html[i], 0, "alias", i, "identical")
        for i in self.pick(self.spec.exact_copies):
            path = EXACT_PREFIX + self.names[i]
            self.add_copy(site, path, self.primary_html[i], 0, "exact", i, "identical")

    def mirror_site(self) -> None:
        """Host B (file 1): every page and the index, same paths, other template."""
        site = self.sites["mirror"]
        for i, doc in enumerate(self.docs):
            html = render_page(site, doc, self.links(i, self.local))
            self.add_copy(site, site.prefix + self.names[i], html, 1, "mirror", i, "boilerplate")
        index = render_index(site, [(self.names[i], self.titles[i]) for i in range(self.n)])
        self.add_copy(
            site, site.prefix + "index.html", index, 1, "mirror-index", None, "boilerplate"
        )

    def stale_site(self) -> None:
        """Host C (file 1): older release; a share of pages edited at the stated rates."""
        site = self.sites["stale"]
        ins, dele, sub = self.spec.stale_rates
        rates = f"mutate(insert={ins:g},delete={dele:g},substitute={sub:g})"
        edited = self.rng.random(self.n) < self.spec.stale_share
        for i, doc in enumerate(self.docs):
            if edited[i]:
                doc = edit_document(doc, self.rng, ins, dele, sub)
            html = render_page(site, doc, self.links(i, self.local))
            edit = "boilerplate+" + rates if edited[i] else "boilerplate"
            self.add_copy(site, site.prefix + self.names[i], html, 1, "stale", i, edit)
        index = render_index(site, [(self.names[i], self.titles[i]) for i in range(self.n)])
        self.add_copy(
            site, site.prefix + "index.html", index, 1, "stale-index", None, "boilerplate"
        )
        self.topology["stale_edited_pages"] = [self.names[i] for i in np.flatnonzero(edited)]
        self.topology["stale_rates"] = {"insert": ins, "delete": dele, "substitute": sub}

    def partial_site(self) -> None:
        """Host D (file 2): another prefix, a share of pages missing, linked on host A."""
        site = self.sites["partial"]
        kept = self.rng.random(self.n) >= self.spec.partial_drop_share

        def href(i: int | None) -> str:
            if i is None:
                return "index.html"
            return self.names[i] if kept[i] else self.primary_url[i]

        for i, doc in enumerate(self.docs):
            if kept[i]:
                html = render_page(site, doc, self.links(i, href))
                path = site.prefix + self.names[i]
                self.add_copy(site, path, html, 2, "partial", i, "boilerplate")
        index = render_index(site, [(href(i), self.titles[i]) for i in range(self.n)])
        path = site.prefix + "index.html"
        self.add_copy(site, path, index, 2, "partial-index", None, "boilerplate+links")
        self.topology["partial_missing_pages"] = [self.names[i] for i in np.flatnonzero(~kept)]

    def excerpts(self) -> None:
        """A blog (file 2) quoting the first part of some pages, with a link to the source."""
        site = self.sites["excerpt"]
        keep = self.spec.excerpt_keep
        for i in self.pick(self.spec.excerpts):
            doc = truncate_document(self.docs[i], keep)
            links = PageLinks(index=site.prefix, related=((self.primary_url[i], self.titles[i]),))
            path = f"{site.prefix}notes-on-{doc.slug}/"
            html = render_page(site, doc, links)
            # The blog is not part of the collection, whatever text it quotes.
            edit = f"boilerplate+truncate({keep:g})"
            self.add_copy(site, path, html, 2, "excerpt", i, edit, collection=None)

    def unrelated(self) -> None:
        """Other documents on other hosts (file 0), each its own original."""
        hosts = unrelated_sites()
        for k, doc in enumerate(self.others):
            site, gz = hosts[k % len(hosts)]
            html = render_page(site, doc, PageLinks(index=site.prefix))
            path = f"{site.prefix}{doc.slug.replace('.', '-')}"
            rec = self.add(site, path, html, 0, "unrelated", original=doc.doc_id)
            if gz:
                rec.body = gzip_bytes(rec.body)
                rec.gzip_body = True

    def skipped(self) -> None:
        """Records a reader must account for but not turn into pages."""
        primary, partial = self.primary, self.sites["partial"]
        for k in range(self.spec.n_errors):
            site, file = (primary, 0) if k % 2 == 0 else (partial, 2)
            url = site.url(f"missing-page-{k}.html")
            html = render_error_page(site, 404, "Not Found", url)
            self.add(
                site,
                url.split(site.host, 1)[1],
                html,
                file,
                "error",
                status=404,
                reason="Not Found",
                skip_reason="http-status",
            )
        for k, i in enumerate(self.pick(self.spec.n_redirects)):
            # Half are old paths moved into the library, half http-to-https upgrades.
            target = self.primary_url[i]
            rec = self.add(
                primary,
                f"/3.11/lib/{self.names[i]}",
                render_redirect_page(target),
                0,
                "redirect",
                status=301,
                reason="Moved Permanently",
                location=target,
                skip_reason="redirect",
            )
            if k % 2:
                rec.url = target.replace("https://", "http://", 1)
        png = self.add(
            primary,
            primary.prefix + "_static/logo.png",
            "",
            0,
            "asset",
            content_type="image/png",
            skip_reason="not-html",
        )
        png.body = tiny_png()
        css = self.add(
            primary,
            primary.prefix + "_static/site.css",
            "",
            0,
            "asset",
            content_type="text/css",
            skip_reason="not-html",
        )
        css.body = b"body{font-family:sans-serif;max-width:60em;margin:0 auto}\n"
        # A later visit to unchanged primary pages, recorded as a digest reference.
        for i in self.pick(self.spec.n_revisits):
            body = self.primary_html[i].encode("utf-8")
            self.add(
                primary,
                primary.prefix + self.names[i],
                "",
                2,
                "revisit",
                record_type="revisit",
                refers_to_url=self.primary_url[i],
                payload_digest=payload_digest(body),
                refers_to_length=len(body),
                skip_reason="revisit",
                original=self.docs[i].doc_id,
                primary_url=self.primary_url[i],
            )


def _schedule(records: list[CrawlRecord], rng: np.random.Generator) -> list[CrawlRecord]:
    """Interleave hosts within each WARC file, as a crawler does, and time every fetch.

    File k is crawled on day k, a fetch every 1-3 seconds; a revisit refers to the first
    capture of its URL.
    """
    out: list[CrawlRecord] = []
    first_seen: dict[str, datetime] = {}
    for file in sorted({r.warc_file for r in records}):
        batch = [r for r in records if r.warc_file == file]
        batch = [batch[i] for i in rng.permutation(len(batch))]
        t = CRAWL_START + timedelta(days=file)
        for r in batch:
            t += timedelta(seconds=int(rng.integers(1, 4)))
            r.fetched_at = t
            if r.record_type == "response" and r.status == 200:
                first_seen.setdefault(r.url, t)
        out.extend(batch)
    for r in out:
        if r.record_type == "revisit":
            r.refers_to_date = first_seen[r.refers_to_url or ""]
    return out
