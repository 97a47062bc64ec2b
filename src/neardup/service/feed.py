"""Feed crawl files into a service index: what `neardup add` does, callable from Python.

Reading, sketching and applying are a pipeline: this process reads the files and applies
batches, while worker processes sketch the next batches (`prepare.prepare_batch`), so a
batch's sketching overlaps the previous batch's apply. Batches are applied in file order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path

from neardup.ingest import extract_page, iter_records
from neardup.pipeline.executors.local import LocalEngine
from neardup.service.index import ServiceIndex
from neardup.service.prepare import prepare_batch
from neardup.service.updates import PageUpdate
from neardup.store.outputs import check_no_overlap


def add_files(
    store: str | Path,
    inputs: Sequence[str | Path],
    batch: int = 1000,
    links: bool = True,
    workers: int | None = None,
) -> dict[str, float]:
    """Add or update the pages of crawl files (redirects included), `batch` pages per
    transaction; returns the totals of the applied batches and the index's counts.

    With `links`, each added URL's `links_in` becomes the number of distinct pages of these
    files linking to it, sent as one last batch once every file is read (a link can come
    after the page it points to). The store may not overlap the inputs. `workers` sketch
    batches in other processes (default: one per core; 1 sketches in this process)."""
    paths = [str(p) for p in inputs]
    check_no_overlap(store, paths)
    totals: dict[str, float] = {}
    inlinks: Counter[str] = Counter()
    seen: set[str] = set()
    with ServiceIndex(store) as ix:

        def batches() -> Iterator[list[PageUpdate]]:
            pending: list[PageUpdate] = []
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
                    yield pending
                    pending = []
            if pending:
                yield pending

        def count(report: dict[str, float]) -> None:
            for k, v in report.items():
                totals[k] = totals.get(k, 0) + v

        sketch = partial(prepare_batch, settings=ix.settings, dims=ix.options.dims)
        with LocalEngine(workers, window_per_worker=1) as engine:
            for prepared in engine.map(sketch, batches()):
                count(ix.apply_prepared(prepared).to_dict())
        if links:
            urls = sorted(u for u in seen if inlinks.get(u))
            for i in range(0, len(urls), batch):
                chunk = urls[i : i + batch]
                count(ix.apply([PageUpdate(u, links_in=inlinks[u]) for u in chunk]).to_dict())
        return {**totals, **ix.counts()}
