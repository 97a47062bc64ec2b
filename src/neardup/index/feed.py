"""Feed crawl files into a service index: what `neardup add` does, callable from Python.

Reading, sketching and applying are a pipeline: this process reads the files and applies
batches, while worker processes sketch the next batches (`prepare.prepare_batch`), so a
batch's sketching overlaps the previous batch's apply. Batches are applied in file order.

What a small `neardup add` (a 1 % increment) would pay before its first page is kept off
its path: an existing index opens in a thread while the first batches are read and
sketched (they go in as one transaction once it is open), and the worker processes start
only once sketching here has taken `INLINE_SKETCH_S`.
"""

from __future__ import annotations

import contextlib
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

from neardup.config import Settings
from neardup.index.engines.base import FeedInputs, IndexEngine
from neardup.index.engines.embedded import EmbeddedEngine
from neardup.index.files.store import has_index, read_manifest
from neardup.index.service_index import ServiceIndex, stored_config
from neardup.index.state.prepare import PreparedBatch
from neardup.index.state.read_records import as_dict
from neardup.index.state.updates import PageUpdate, ServiceError, ServiceOptions
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
    remove: Sequence[str] = (),
    engine: str = "embedded",
    spark_master: str | None = None,
    spark_conf: dict[str, str] | None = None,
) -> dict[str, float]:
    """Add or update the pages of crawl files (redirects included), `batch` pages per
    transaction; returns the totals of the applied batches, the records left out by reason
    (`skipped: REASON`, and `skipped` in all) and the index's counts.

    `remove` lists the URLs of pages that are gone: they leave the index (their groups
    re-clustered without them) before the files' pages go in, so a page both listed and in
    the files stays. `removed` counts those it held, `remove_missing` the listed URLs it
    did not hold (or held removed already); those take no slot.

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
    process writing the store refuses this (`store.IndexBusy`), or with `wait` is waited for.

    `engine="spark"` reads the files, turns their pages into text and sketches them on
    Spark's executors (`spark_master`, `spark_conf` as for a scan), one task a file; the
    batches come back here in file order and are applied to the index by this process, as
    the embedded engine applies its own (`engines/spark_jobs.py`)."""
    eng = engine_named(engine, spark_master, spark_conf)
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
    with _opened(Path(store), settings, wait, eng) as (ix, mine, options):
        if patterns:
            mine.check_same_pages(mine.replace(**patterns))

        def count(report: dict[str, float]) -> None:
            for k, v in report.items():
                totals[k] = totals.get(k, 0) + v

        gone = list(dict.fromkeys(u for u in remove if u))  # distinct, in their order
        removals = [gone]  # applied once the index is open, before any page of the files

        def put(index: ServiceIndex, prepared: PreparedBatch) -> None:
            """A batch applied as one transaction, with what the engine found before it of
            the saved index (`IndexEngine.lookups`), a save's band index written by it."""
            lookups = eng.lookups(index, prepared)
            done = index.apply_prepared(prepared, lookups=lookups, write_tables=eng.write_tables)
            count(done.to_dict())

        def apply(ahead: list[PreparedBatch]) -> None:
            index = ix.result()
            if removals:
                held = _held(index, removals.pop())
                totals["remove_missing"] = len(gone) - len(held)
                for i in range(0, len(held), batch):
                    out = [PageUpdate(u, remove=True) for u in held[i : i + batch]]
                    put(index, index.prepared(out))
            if ahead:
                joined = PreparedBatch.joined(ahead)
                seen.extend(hash(u) for u in joined.updates)
                put(index, joined)

        # The batches sketched while the index opens go in as one transaction (each costs
        # its commit, its files and its share of merges: 0.35 s of ten in a 1 % increment
        # of a million pages); after, one batch a transaction.
        ahead: list[PreparedBatch] = []
        source = eng.sketched(
            FeedInputs(
                paths, Path(store), mine, options.dims, batch, links, workers, skipped, inlinks
            )
        )
        with contextlib.closing(source):  # a failed apply stops it now (Spark's spool removed)
            for prepared in source:
                ahead.append(prepared)
                if ix.done() or len(ahead) >= AHEAD_WHILE_OPENING:
                    apply(ahead)
                    ahead = []
        apply(ahead)
        if links:
            targets = list(inlinks)
            hashes = np.array([hash(u) for u in targets], np.int64)
            hit = np.isin(hashes, np.frombuffer(seen, np.int64))
            urls = sorted(u for u, h in zip(targets, hit.tolist(), strict=True) if h)
            for i in range(0, len(urls), batch):
                chunk = urls[i : i + batch]
                index = ix.result()
                put(index, index.prepared([PageUpdate(u, links_in=inlinks[u]) for u in chunk]))
        totals["skipped"] = totals.get("skipped", 0) + sum(skipped.values())
        totals.update({f"skipped: {r}": n for r, n in sorted(skipped.items())})
        return {**totals, **as_dict(ix.result().counts())}


def _held(index: ServiceIndex, urls: list[str]) -> list[str]:
    """Those of `urls` the index holds (a page or a redirect), not removed, in their order:
    looked up at once (one search of the saved page keys), not a URL at a time (a search
    each: a sixth of removing 1 % of a million-page index)."""
    pages = index.pages
    slots = pages.lookup(urls, [None] * len(urls))
    return [u for u, s in zip(urls, slots, strict=True) if s is not None and not pages.removed[s]]


AHEAD_WHILE_OPENING = 16  # batches sketched ahead at the most while the index opens


@contextlib.contextmanager
def _opened(
    store: Path, settings: Settings | None, wait: bool, engine: IndexEngine
) -> Iterator[tuple[Future[ServiceIndex], Settings, ServiceOptions]]:
    """The index `store` as it opens, with the settings and options it was written with:
    an existing index opens in a thread while this one reads and sketches the first
    batches, which need only its settings (opening a million-page index takes about 0.7 s,
    as long as reading and sketching 10,000 pages: a third of a 1 % increment). A new or
    older index opens first. Closed on the way out; an error of the opening (the lock held
    by another writer, a damaged index) is raised where the index is first wanted, or on
    the way out when it never was."""
    manifest = read_manifest(store) if has_index(store) else None
    if manifest is None:  # a new store, or an older neardup's to convert: opened first
        ix = ServiceIndex(store, settings, wait=wait)
        try:
            opened: Future[ServiceIndex] = Future()
            opened.set_result(ix)
            yield opened, ix.settings, ix.options
        finally:
            ix.close(engine.write_tables)  # a save due at close: the engine writes its tables
        return
    mine, options = stored_config(manifest.meta)
    with ThreadPoolExecutor(1, thread_name_prefix="neardup-open") as pool:
        opening = pool.submit(ServiceIndex, store, settings, wait=wait)
        try:
            yield opening, mine, options
        except BaseException:
            with contextlib.suppress(BaseException):
                opening.result().close(engine.write_tables)
            raise
        opening.result().close(engine.write_tables)


def engine_named(
    name: str, master: str | None = None, conf: dict[str, str] | None = None
) -> IndexEngine:
    """The engine of `neardup add --engine NAME` (`master`, `conf`: Spark's, as for a scan)."""
    if name == "embedded":
        return EmbeddedEngine()
    if name == "spark":
        from neardup.index.engines.spark import SparkEngine

        return SparkEngine(master, conf)
    raise ServiceError(f"unknown engine {name!r}: embedded or spark")
