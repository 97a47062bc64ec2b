"""Feed crawl files into a service index: what `neardup add` does, callable from Python.

Reading, sketching and applying are a pipeline: this process reads the files and applies
batches, while worker processes sketch the next batches (`prepare.prepare_batch`), so a
batch's sketching overlaps the previous batch's apply. Batches are applied in file order.
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path

import numpy as np

from neardup.config import Settings
from neardup.ingest import extract_page, iter_records
from neardup.ingest.eligibility import REDIRECT_REASON, page_reason, rule_of
from neardup.pipeline.executors.local import LocalEngine
from neardup.service.index import ServiceIndex
from neardup.service.layout import has_index
from neardup.service.prepare import prepare_batch
from neardup.service.updates import PageUpdate
from neardup.store.outputs import check_no_overlap


def add_files(
    store: str | Path,
    inputs: Sequence[str | Path],
    batch: int = 1000,
    links: bool = True,
    workers: int | None = None,
    include_url: Sequence[str] | None = None,
    exclude_url: Sequence[str] | None = None,
    include_crawler_files: bool | None = None,
    wait: bool = False,
) -> dict[str, float]:
    """Add or update the pages of crawl files (redirects included), `batch` pages per
    transaction; returns the totals of the applied batches, the records left out by reason
    (`skipped: REASON`, and `skipped` in all) and the index's counts.

    A record is added when a scan of the same files would compare it: the one eligibility
    rule (`ingest/eligibility.py`: record type, crawler files, URL patterns, HTTP status,
    content type, text), with the index's settings. A 3xx with a Location is sent as a
    redirect (the scan's link graph follows it too). `include_url`/`exclude_url` and
    `include_crawler_files` set a new index's rule; an existing index keeps its own, and
    another is refused (`SettingsError`) rather than leave it agreeing with no scan.

    With `links`, each added URL's `links_in` becomes the number of distinct pages of these
    files linking to it, sent as one last batch once every file is read (a link can come
    after the page it points to). The store may not overlap the inputs. `workers` sketch
    batches in other processes (default: one per core; 1 sketches in this process). Another
    process writing the store refuses this (`layout.IndexBusy`), or with `wait` is waited for."""
    paths = [str(p) for p in inputs]
    check_no_overlap(store, paths)
    patterns: dict[str, object] = {
        k: tuple(v) for k, v in (("include_url", include_url), ("exclude_url", exclude_url)) if v
    }
    if include_crawler_files is not None:
        patterns["include_crawler_files"] = include_crawler_files
    new = not has_index(Path(store))
    totals: dict[str, float] = {}
    skipped: Counter[str] = Counter()
    inlinks: Counter[str] = Counter()
    # The URLs these files added, as their hashes (8 bytes a page, where a set of the
    # strings cost about 150): links_in goes to those alone. Python's string hash is
    # stable within the process, and two URLs share one with odds of about 1 in 2**64 / n.
    seen = array("q")
    settings = Settings(**patterns) if patterns and new else None
    with ServiceIndex(store, settings, wait=wait) as ix:
        if patterns:
            ix.settings.check_same_pages(ix.settings.replace(**patterns))
        rule = rule_of(ix.settings)
        cap = ix.settings.max_payload_bytes

        def batches() -> Iterator[list[PageUpdate]]:
            pending: list[PageUpdate] = []
            for rec in iter_records(paths, None, cap):
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
                seen.append(hash(update.url))
                if len(pending) >= batch:
                    yield pending
                    pending = []
            if pending:
                yield pending

        def count(report: dict[str, float]) -> None:
            for k, v in report.items():
                totals[k] = totals.get(k, 0) + v

        # The records passed the whole rule above (URL steps included): no second URL check.
        sketch = partial(prepare_batch, settings=ix.settings, dims=ix.options.dims)
        with LocalEngine(workers, window_per_worker=1) as engine:
            for prepared in engine.map(sketch, batches()):
                count(ix.apply_prepared(prepared).to_dict())
        if links:
            targets = list(inlinks)
            hashes = np.array([hash(u) for u in targets], np.int64)
            hit = np.isin(hashes, np.frombuffer(seen, np.int64))
            urls = sorted(u for u, h in zip(targets, hit.tolist(), strict=True) if h)
            for i in range(0, len(urls), batch):
                chunk = urls[i : i + batch]
                count(ix.apply([PageUpdate(u, links_in=inlinks[u]) for u in chunk]).to_dict())
        totals["skipped"] = totals.get("skipped", 0) + sum(skipped.values())
        totals.update({f"skipped: {r}": n for r, n in sorted(skipped.items())})
        return {**totals, **ix.counts()}
