"""The updates a crawl's files make for the index, batch by batch: what `neardup add` sends
on either engine (this process reads them for the embedded engine, each Spark task reads its
file's for the Spark engine), so both admit, skip and link a record alike."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence

from neardup.config import Settings
from neardup.index.state.updates import PageUpdate
from neardup.ingest import extract_page, iter_records
from neardup.ingest.eligibility import REDIRECT_REASON, page_reason, rule_of


def page_batches(
    paths: Sequence[str],
    settings: Settings,
    batch: int,
    links: bool,
    skipped: Counter[str],
    inlinks: Counter[str],
) -> Iterator[list[PageUpdate]]:
    """The updates of the files' records, `batch` at a time, in file order: what the one
    eligibility rule (`settings`) lets in, a 3xx with a Location as a redirect. The records
    left out are counted in `skipped` by reason; with `links`, the distinct pages linking to
    each URL in `inlinks`. The records passed the whole rule (URL steps included): the
    index makes no second URL check."""
    rule = rule_of(settings)
    cap = settings.max_payload_bytes
    pending: list[PageUpdate] = []
    for rec in iter_records(list(paths), None, cap) if paths else ():
        reason = rule.record_reason(rec)
        update = None
        if reason == REDIRECT_REASON and rec.url and rec.redirect_to:
            update = PageUpdate(rec.url, redirect_to=rec.redirect_to)
        elif reason is None and not rec.url:
            reason = "no URL"  # the index holds pages by their URL
        elif reason is None and rec.url:
            page = extract_page(rec, cap, links=links)
            reason = page_reason(page)
            if reason is None:
                inlinks.update({u.split("#")[0] for u in page.links} - {rec.url})
                update = PageUpdate(rec.url, text=page.text)
        if update is None:
            skipped[(reason or "").split(":")[0]] += 1
            continue
        pending.append(update)
        if len(pending) >= batch:
            yield pending
            pending = []
    if pending:
        yield pending
