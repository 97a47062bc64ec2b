"""Feed crawl files into a service index: what `neardup add` does, callable from Python."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from neardup.ingest import extract_page, iter_records
from neardup.service.index import ServiceIndex
from neardup.service.updates import PageUpdate
from neardup.store.outputs import check_no_overlap


def add_files(
    store: str | Path, inputs: Sequence[str | Path], batch: int = 1000, links: bool = True
) -> dict[str, float]:
    """Add or update the pages of crawl files (redirects included), `batch` pages per
    transaction; returns the totals of the applied batches and the index's counts.

    With `links`, each added URL's `links_in` becomes the number of distinct pages of these
    files linking to it, sent as one last batch once every file is read (a link can come
    after the page it points to). The store may not overlap the inputs."""
    paths = [str(p) for p in inputs]
    check_no_overlap(store, paths)
    totals: dict[str, float] = {}
    inlinks: Counter[str] = Counter()
    seen: set[str] = set()
    with ServiceIndex(store) as ix:
        pending: list[PageUpdate] = []

        def flush() -> None:
            if pending:
                for k, v in ix.apply(pending).to_dict().items():
                    totals[k] = totals.get(k, 0) + v
                pending.clear()

        for rec in iter_records(paths, None, ix.settings.max_payload_bytes):
            if not rec.url:
                continue
            if rec.redirect_to:
                pending.append(PageUpdate(rec.url, redirect_to=rec.redirect_to))
            else:
                page = extract_page(rec, ix.settings.max_payload_bytes, links=links)
                if page.skipped_reason or not page.text:
                    continue
                inlinks.update({u.split("#")[0] for u in page.links} - {rec.url})
                pending.append(PageUpdate(rec.url, text=page.text))
            seen.add(rec.url)
            if len(pending) >= batch:
                flush()
        flush()
        if links:
            for url in sorted(u for u in seen if inlinks.get(u)):
                pending.append(PageUpdate(url, links_in=inlinks[url]))
                if len(pending) >= batch:
                    flush()
            flush()
        return {**totals, **ix.counts()}
