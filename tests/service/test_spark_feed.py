"""`neardup add --engine spark` (`index/engines/spark_jobs.py`): the crawl read and sketched on
Spark's executors, a task a file, the batches applied to the index by this process.

Checked on the generated crawl (request-first WARCs with redirects, error pages, links and
near copies) against the scan of the same files (the reference the index did not compute)
and against the embedded engine's index: the same groups, the same winners, the same page
for page status, whichever engine added which file, and with pages removed."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import shared_data
from index_states import index_state as _state
from run_groups import scan_groups
from spark_session import spark  # noqa: F401 - the fixture

from neardup.index.feed import add_files
from neardup.index.files.band_save import fill_tables
from neardup.index.state.lookups import HERE
from neardup.service import ServiceIndex
from neardup.store.file_vectors import whole


def _groups(store: Path) -> set[frozenset[str]]:
    with ServiceIndex(store, read_only=True) as ix:
        return {frozenset(m) for m in ix.groups.values() if len(m) >= 2}


@pytest.fixture(scope="module")
def embedded(demo_crawl, tmp_path_factory) -> Path:
    store = tmp_path_factory.mktemp("embedded") / "s"
    add_files(store, demo_crawl.warc_paths, batch=7, workers=1)
    return store


def test_an_index_added_on_spark_is_the_embedded_engines_and_has_the_scans_groups(
    spark,  # noqa: F811 - the fixture
    demo_crawl,
    demo_run,
    embedded,
    tmp_path,
):
    store = tmp_path / "s"
    totals = add_files(store, demo_crawl.warc_paths, batch=7, engine="spark")
    plain = add_files(tmp_path / "plain", demo_crawl.warc_paths, batch=7, workers=1)
    for key in ("new", "skipped", "pages", "redirects", "groups", "duplicate_groups"):
        assert totals[key] == plain[key], key
    assert {k: v for k, v in totals.items() if k.startswith("skipped")} == {
        k: v for k, v in plain.items() if k.startswith("skipped")
    }
    assert totals["skipped"] > 0 and totals["redirects"] > 0  # the crawl's hard cases came
    want = scan_groups(demo_run.path)
    assert want and _groups(store) == want
    assert _state(store) == _state(embedded)


def test_batches_of_both_engines_mix_and_removals_go_through_either(
    spark,  # noqa: F811 - the fixture
    demo_crawl,
    embedded,
    tmp_path,
):
    files = list(demo_crawl.warc_paths)
    assert len(files) >= 2
    split = {}  # a file, then the others (each add counts the in-links of its own files)
    for first, then in (("embedded", "embedded"), ("spark", "embedded"), ("embedded", "spark")):
        store = tmp_path / f"{first}-{then}"
        add_files(store, files[:1], batch=5, engine=first, workers=1)
        add_files(store, files[1:], batch=5, engine=then, workers=1)
        split[first, then] = _state(store)
        assert split[first, then] == split["embedded", "embedded"], (first, then)
    assert _groups(store) == _groups(embedded)
    with ServiceIndex(embedded, read_only=True) as ix:
        dups = sorted(u for u in ix.pages if ix.status(u).is_duplicate)
        gone, changed = dups[:3], dups[3:9]
    assert gone and len(changed) == 6
    # Six duplicates changed: each now a text of its own (so each leaves its group).
    texts = {u: " ".join(f"w{i}x{j}" for j in range(90)) for i, u in enumerate(changed)}
    change = tmp_path / "changed.jsonl"
    change.write_text("".join(json.dumps({"url": u, "text": t}) + "\n" for u, t in texts.items()))
    states = []
    for engine in ("embedded", "spark"):
        store = tmp_path / f"changed-{engine}"
        add_files(store, files, batch=5, engine=engine, workers=1)
        totals = add_files(store, [change], engine=engine, remove=gone)
        assert totals["removed"] == len(gone) and totals["changed"] == len(changed)
        states.append(_state(store))
    assert states[0] == states[1]
    assert all(states[1][u]["removed"] for u in gone)
    assert not any(states[1][u]["is_duplicate"] for u in changed)


def test_a_spark_add_reads_the_saved_index_searched_on_the_executors(
    spark,  # noqa: F811 - the fixture
    demo_crawl,
    tmp_path,
    monkeypatch,
):
    """Each batch a Spark add applies to a saved index takes the entries of the saved band
    index, classes and page keys its keys need from the executors' search of the saved
    files, and has the pairs of sketches it compares (candidates, losers against winners)
    compared by the executors, with the band keys of the saved nodes among its pages from
    their saved sketches: the applying process searches none of those arrays and reads no
    saved sketch itself (the guess of the keys, `ServiceIndex.saved_queries`, covers them;
    the guess of the saved round-1 searches misses the batches that saves and removals do
    not search ahead), and the index is the one the embedded engine writes, which reads
    saved sketches in its own process."""
    import neardup.index.engines.spark_jobs as spark_feed_module

    # Every batch, however small (by default one of fewer pages is the driver's alone).
    monkeypatch.setattr(spark_feed_module, "EXECUTORS_FROM", 0)
    files = list(demo_crawl.warc_paths)
    stores = {engine: tmp_path / engine for engine in ("embedded", "spark")}
    for store in stores.values():
        add_files(store, files[:1], batch=5, workers=1)
    with ServiceIndex(stores["spark"], read_only=True) as ix:  # saved by the next writer
        nodes = [u for u in sorted(ix.pages) if ix.scan_graph.node[ix.pages.slot(u)]]
        gone = [u for u in nodes if len(ix.groups[ix.status(u).group_id]) > 1][:3]
    assert gone  # pages with near copies, whose band keys their removal takes out
    applied = []
    real = ServiceIndex.apply_prepared

    def searched(graph, pages) -> int:
        return graph.buckets.base_searches + graph.class_searches + pages.key_searches

    def read(graph, pages) -> int:  # saved sketches read here: compared, or for keys
        return pages.saved_rows_compared + graph.sketch_key_reads

    def spy(self, prepared, t0=None, lookups=HERE, write_tables=fill_tables):
        graph, pages = self.scan_graph, self.pages  # (a save during the batch maps new ones)
        before, compared = searched(graph, pages), read(graph, pages)
        sent: list[int] = []
        score = lookups.score

        def counted(folder, pairs):
            sent.append(int(pairs.a.size))
            return score(folder, pairs)

        if score is not None:
            lookups = replace(lookups, score=counted)
        got = real(self, prepared, t0, lookups, write_tables)
        here = read(graph, pages) - compared
        found = lookups.band is not None
        applied.append((found, score is not None, searched(graph, pages) - before))
        removal = all(u.remove for u in prepared.updates.values())
        compares.append((score is not None, removal, here, sum(sent)))
        return got

    compares: list[tuple[bool, bool, int, int]] = []
    # Then pages of the index sent again with texts of their own: they leave their buckets
    # (the keys they are filed under) and enter others; and pages removed.
    with ServiceIndex(stores["spark"], read_only=True) as ix:
        urls = sorted(ix.pages)[::7][:12]
    texts = {u: " ".join(f"v{i}y{j}" for j in range(90)) for i, u in enumerate(urls)}
    change = tmp_path / "changed.jsonl"
    change.write_text("".join(json.dumps({"url": u, "text": t}) + "\n" for u, t in texts.items()))
    monkeypatch.setattr(ServiceIndex, "apply_prepared", spy)
    add_files(stores["spark"], files[1:], batch=5, engine="spark", workers=1)
    add_files(stores["spark"], [change], engine="spark", remove=gone)
    preloaded = [searched for was, _, searched in applied if was]
    assert len(preloaded) == len(applied) >= 3 and sum(preloaded) == 0
    assert all(elsewhere for elsewhere, *_ in compares)
    assert sum(here for *_, here, _ in compares) == 0 and sum(sent for *_, sent in compares) > 0
    compares.clear()
    add_files(stores["embedded"], files[1:], batch=5, workers=1)
    add_files(stores["embedded"], [change], remove=gone)
    assert sum(here for *_, here, _ in compares) > 0  # read here, and counted
    assert sum(here for _, removal, here, _ in compares if removal) > 0  # removals too
    monkeypatch.setattr(ServiceIndex, "apply_prepared", real)
    assert _state(stores["spark"]) == _state(stores["embedded"])


@pytest.mark.parametrize("kept", [False, True])
def test_the_saves_of_a_spark_add_have_their_band_index_written_by_the_executors(
    spark,  # noqa: F811 - the fixture
    demo_crawl,
    tmp_path,
    monkeypatch,
    kept,
):
    """With a save after every batch of a Spark add, each save's band index is written by
    the executors, a task a table, from the save before and the changes since (this
    process's table writer fails if it is called); the index, band keys, graph and pages,
    is the one the embedded engine saves with its own process's writer. With `kept`, the
    saves keep the band index's base while the changes are few (`BandBuckets.saved`), and
    the band index as saved is the base with the changes kept beside it."""
    import neardup.index.engines.spark_jobs as spark_feed_module
    import neardup.index.index_saves as index_saves_module
    from neardup.index.files import band_save
    from neardup.index.state import band_buckets

    if not kept:  # every save folds the changes in: the executors write every table
        monkeypatch.setattr(band_buckets, "BASE_KEPT_SHARE", 1 << 30)

    files = list(demo_crawl.warc_paths)
    stores = {engine: tmp_path / engine for engine in ("embedded", "spark")}
    for store in stores.values():
        add_files(store, files[:1], batch=50, workers=1)
        ServiceIndex(store).close()  # the first save, made as the writer opens
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 0)
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_SHARE", 1 << 30)
    saves: list[str] = []
    real_save = ServiceIndex._save_graph_now

    def counted(self, write_tables=fill_tables):
        saves.append(str(self.store))
        return real_save(self, write_tables)

    monkeypatch.setattr(ServiceIndex, "_save_graph_now", counted)
    add_files(stores["embedded"], files[1:], batch=50, workers=1)
    assert saves.count(str(stores["embedded"])) >= 2

    def here(*args: object) -> None:
        raise AssertionError("a table of the band index written by the applying process")

    with monkeypatch.context() as m:
        m.setattr(spark_feed_module, "EXECUTORS_FROM", 0)
        m.setattr(band_save, "write_table", here)
        add_files(stores["spark"], files[1:], batch=50, engine="spark", workers=1)
    assert saves.count(str(stores["spark"])) >= 2  # (its batches are joined otherwise)
    graphs, bands, runs = [], [], []
    for store in stores.values():
        with ServiceIndex(store, read_only=True) as ix:
            assert ix.graph_meta is not None and not ix.manifest.segments  # opened from a save
            graphs.append(ix.scan_graph.view())
            b = ix.scan_graph.buckets  # the saved band index, by URL
            keys = whole(b.base_keys)  # (read by blocks)
            assert all((np.diff(keys[t]) >= 0).all() for t in range(b.tables))
            runs.append(b.taken.live)
            tables = [b._folded(t) for t in range(b.tables)]  # the base and what it kept
            bands.append(
                sorted(
                    (t, k, ix.pages.url_at(s))
                    for t, (tk, ts) in enumerate(tables)
                    for k, s in zip(tk.tolist(), ts.tolist(), strict=True)
                )
            )
    assert graphs[0] == graphs[1]
    # Every node under its sketch's keys, once a table (the graph's keys: from the sketches).
    want = sorted((t, k, u) for u, keys in graphs[0][-1].items() for t, k in enumerate(keys))
    assert bands[0] == bands[1] == want and want
    assert bool(runs[0]) == bool(runs[1]) == kept  # the last save kept the base, or folded
    assert _state(stores["spark"]) == _state(stores["embedded"])


def test_a_small_batch_of_a_spark_add_runs_no_job_of_its_own(
    spark,  # noqa: F811 - the fixture
    demo_crawl,
    tmp_path,
    monkeypatch,
):
    """Below `EXECUTORS_FROM` pages a batch is applied by the driver alone (its searches and
    comparisons cost less there than a Spark job each); at it or above, on the executors."""
    import neardup.index.engines.spark_jobs as spark_feed_module

    files = list(demo_crawl.warc_paths)
    store = tmp_path / "s"
    add_files(store, files[:1], batch=5, workers=1)
    sizes: list[tuple[int, bool]] = []
    real = ServiceIndex.apply_prepared

    def spy(self, prepared, t0=None, lookups=HERE, write_tables=fill_tables):
        elsewhere = lookups.band is not None and lookups.score is not None
        sizes.append((len(prepared.updates), elsewhere))
        return real(self, prepared, t0, lookups, write_tables)

    monkeypatch.setattr(ServiceIndex, "apply_prepared", spy)
    monkeypatch.setattr(spark_feed_module, "EXECUTORS_FROM", 12)
    add_files(store, files[1:], batch=5, engine="spark", workers=1)
    assert {n >= 12 for n, _ in sizes} == {True, False}  # batches of both kinds
    assert all(elsewhere == (n >= 12) for n, elsewhere in sizes)


def test_the_add_command_takes_the_spark_engine(spark, demo_crawl, tmp_path):  # noqa: F811
    from typer.testing import CliRunner

    from neardup.cli.main import app

    runner = CliRunner()
    store = tmp_path / "s"
    files = [str(p) for p in demo_crawl.warc_paths]
    args = ["add", str(store), *files, "--json", "--engine", "spark"]
    res = runner.invoke(app, [*args, "--spark-conf", "spark.task.maxFailures=1"])
    assert res.exit_code == 0, res.output
    report = json.loads(res.stdout)
    assert report["new_pages"] > 0 and report["index_pages"] == len(_state(store)) - 1
    res = runner.invoke(app, [*args, "--spark-conf", "no-equals-sign"])
    assert res.exit_code == 2 and "KEY=VALUE" in res.output
    res = runner.invoke(app, ["add", str(store), *files, "--engine", "mars"])
    assert res.exit_code == 2 and "mars" in res.output and "Traceback" not in res.output


def test_a_failed_spark_job_is_one_line_and_the_index_keeps_its_last_version(
    spark,  # noqa: F811 - the fixture
    demo_crawl,
    tmp_path,
    monkeypatch,
):
    """An executor's exception ends `add` with one line naming it (exit 2), and the batches
    of the files before it stay committed, as the embedded engine's do."""
    from typer.testing import CliRunner

    from neardup.cli.main import app
    from neardup.index.engines import spark_jobs

    store = tmp_path / "s"
    files = [str(p) for p in demo_crawl.warc_paths]
    real = spark_jobs._run
    calls = []

    def failing(tasks):  # defined here: shipped to the executors by value
        for _ in tasks:
            raise OSError("the disk is full")
        yield b""

    def second_wave_fails(context, tasks, work, parts):  # the executors' own report
        calls.append(parts)
        if len(calls) == 1:
            return real(context, tasks, work, parts)
        return real(context, tasks, failing, parts)

    monkeypatch.setattr(spark_jobs, "_run", second_wave_fails)
    res = CliRunner().invoke(app, ["add", str(store), *files, "--engine", "spark"])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in res.output, res.output
    assert "Spark stage add failed" in lines[0] and "the disk is full" in lines[0], lines[0]
    assert len(calls[0]) < len(files)  # some files came before the failure...
    with ServiceIndex(store, read_only=True) as ix:
        assert len(ix.pages) > 0  # ...and their pages are in the index


def _published_layouts(folder: Path) -> list[str]:
    """Crawl files as crawlers publish them, written by warcio, not by neardup: a
    request-first WARC with metadata records (Common Crawl's layout) holding near copies and
    a redirect, a WET of converted text, a WARC with a damaged gzip member, and the crawl of
    crawler files and error pages."""
    import random

    from ccwarc import Fetch, write_warc, write_wet
    from damaged_warcs import gz, lengthen, page
    from eligibility_crawl import write_artefact_warc

    rng = random.Random(5)
    vocab = [f"term{i}" for i in range(300)]
    fetches = []
    for b in range(12):
        base = [rng.choice(vocab) for _ in range(120)]
        for v in range(3):
            words = list(base)
            for i in rng.sample(range(120), 2 * v):
                words[i] = rng.choice(vocab)
            html = f"<html><body><p>{' '.join(words)}</p></body></html>"
            fetches.append(Fetch(f"https://m{v}.example/doc{b}.html", html))
    fetches.append(Fetch("https://m0.example/old", status=301, location="/doc3.html"))
    warc = write_warc(folder / "cc.warc.gz", fetches, request_first=True)
    texts = [(f"https://wet.example/{i}", " ".join(vocab[i : i + 90])) for i in range(6)]
    wet = write_wet(folder / "cc.warc.wet.gz", [*texts, ("https://wet.example/c", texts[0][1])])
    records = [page(i) for i in range(8)]
    records[3] = lengthen(records[3], 400)  # runs into the next members
    damaged = folder / "damaged.warc.gz"
    damaged.write_bytes(gz(records))
    return [str(warc), str(wet), str(damaged), str(write_artefact_warc(folder))]


@pytest.mark.parametrize("real", [False, True])
def test_both_engines_add_published_layouts_and_real_crawls_alike(
    spark,  # noqa: F811 - the fixture
    tmp_path,
    real,
):
    """On files an independent writer made as crawlers publish them (and, where the shared
    data is present, on real crawls with revisits, chunked bodies and an old WARC version),
    the Spark add admits, skips and groups every record as the embedded add does, and its
    groups are the scan's."""
    import neardup

    if real:
        inputs = [
            str(shared_data("warc", name))
            for name in (
                "resiliparse-warcfile.warc.gz",
                "pywb-dupes.warc.gz",
                "ukwa-govuk-2.warc.gz",
            )
        ]
    else:
        inputs = _published_layouts(tmp_path)
    got = {}
    for engine in ("embedded", "spark"):
        totals = add_files(tmp_path / engine, inputs, batch=9, engine=engine, workers=1)
        got[engine] = (_state(tmp_path / engine), totals)
    (spark_state, spark_totals), (plain_state, plain_totals) = got["spark"], got["embedded"]
    assert spark_state == plain_state
    for key in ("new", "skipped", "pages", "redirects", "groups", "duplicate_groups"):
        assert spark_totals[key] == plain_totals[key], key
    assert {k: v for k, v in spark_totals.items() if k.startswith("skipped: ")} == {
        k: v for k, v in plain_totals.items() if k.startswith("skipped: ")
    }
    assert spark_totals["new"] > 0 and spark_totals["skipped"] > 0
    run = neardup.scan(inputs, tmp_path / "run", workers=1)
    assert _groups(tmp_path / "spark") == scan_groups(run.path)
    if not real:
        assert scan_groups(run.path)  # the near copies were found: not a vacuous comparison
