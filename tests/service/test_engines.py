"""The contract of the index's engines (`base.IndexEngine`), run over each engine:
the embedded one, and Spark on `local[2]`. The same cases at the seam: the saved index's
entries for a batch's keys, the resemblance of pairs of saved sketches, a save's band
tables, and a batch applied with what the engine found before it.

Each case checks an engine against an answer computed without it (the saved files read
whole, the sketches compared here, the graph built at once), so the engines agree because
each is right, not merely with each other."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from crawl_texts import near_copies
from spark_session import spark  # noqa: F401 - the fixture

import neardup.index.index_saves as index_saves_module
from neardup.index.engines import spark_jobs as spark_feed_module
from neardup.index.engines.base import IndexEngine, found_elsewhere
from neardup.index.engines.embedded import EmbeddedEngine
from neardup.index.files.saved_search import SEARCHED
from neardup.index.state.found import PairsToScore
from neardup.index.state.lookups import HERE
from neardup.index.state.scangraph import ScanGraph, saved_node_keys
from neardup.kernels import estimate_resemblance
from neardup.service import PageUpdate, ServiceIndex

TEXTS = near_copies(160, seed=5, vocab=500, words=100, bases=8, edits=10)


@pytest.fixture(params=["embedded", "spark"])
def engine(request, monkeypatch) -> IndexEngine:
    if request.param == "embedded":
        return EmbeddedEngine()
    request.getfixturevalue("spark")  # the local[2] session every Spark test shares
    from neardup.index.engines.spark import SparkEngine

    # Every batch and save on the executors, however small (by default a small one stays).
    monkeypatch.setattr(spark_feed_module, "EXECUTORS_FROM", 0)
    return SparkEngine()


def _url(i: int) -> str:
    return f"https://h{i % 7}.example/p/{i}"


@pytest.fixture
def saved(tmp_path, monkeypatch) -> Path:
    """An index of 120 pages whose graph, pages and groups are saved (mapped on opening)."""
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 0)
    store = tmp_path / "saved"
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate(_url(i), text=TEXTS[i]) for i in range(120)])
        assert ix.graph_meta is not None
    monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 10**9)
    return store


def _batch() -> list[PageUpdate]:
    """New pages, stored pages sent with other texts, a removal and a redirect."""
    out = [PageUpdate(_url(i), text=TEXTS[i]) for i in range(120, 160)]
    out += [PageUpdate(_url(i), text=TEXTS[(i + 40) % 160]) for i in range(0, 30, 3)]
    out += [PageUpdate(_url(31), remove=True), PageUpdate(_url(32), redirect_to=_url(33))]
    return out


def test_search_finds_every_saved_entry_of_the_batchs_keys(engine, saved):
    with ServiceIndex(saved) as ix:
        prepared = ix.prepared(_batch())
        folder, queries = ix.saved_queries(prepared)
        found, node_keys = engine.search(folder, queries, ix.scan_graph.shape)
        for name, rows in queries.items():
            key_file, value_file = SEARCHED[name]
            keys = np.atleast_2d(np.load(folder / f"{key_file}.npy"))
            values = np.atleast_2d(np.load(folder / f"{value_file}.npy"))
            for row, q in enumerate(rows):
                hit = np.isin(keys[row], q)
                want = sorted(zip(keys[row][hit].tolist(), values[row][hit].tolist(), strict=True))
                got = found[name][row]
                assert sorted(zip(got.keys.tolist(), got.values.tolist(), strict=True)) == want
                assert np.array_equal(got.asked, np.unique(q))
        assert found["page"][0].keys.size > 0  # not vacuous: stored pages were found
        slots = np.asarray(found["page"][0].values, np.int64)
        want_keys = saved_node_keys(ix.settings, ix.pages, slots, ix.scan_graph.node)
        assert node_keys.keys() == want_keys.keys() and node_keys
        assert all(np.array_equal(node_keys[s], want_keys[s]) for s in want_keys)


def test_score_is_the_resemblance_of_the_sketches_with_the_changed_ones_sent(engine, saved):
    with ServiceIndex(saved) as ix:
        folder = Path(ix.pages.saved_from[0])
        rng = np.random.default_rng(3)
        a = rng.integers(0, 120, 200)
        b = rng.integers(0, 120, 200)
        changed = np.array([2, 5, 7], np.int64)  # rows the batch changed: sent with the pairs
        sigs = ix.pages.sigs[changed].copy()
        sigs[:, ::2] += 1
        got = engine.score(folder, PairsToScore(a, b, changed, sigs))
        rows = ix.pages.sigs[: ix.pages.n].copy()
        rows[changed] = sigs
        want = np.asarray(estimate_resemblance(rows[a], rows[b]), np.float64).reshape(-1)
        assert np.array_equal(np.asarray(got), want)
        assert (want > 0.5).any() and (want < 0.5).any()  # not vacuous


def test_the_band_tables_an_engine_writes_are_those_of_the_graph(engine, saved):
    with ServiceIndex(saved) as ix:
        ix.apply_prepared(ix.prepared(_batch()), write_tables=engine.write_tables)
        ix._save_graph_now(engine.write_tables)  # the band tables: the base and the changes
    with ServiceIndex(saved, read_only=True) as ix:
        assert ix.graph_meta is not None and ix.graph_tail == 0  # mapped, nothing replayed
        got = ix.scan_graph.view()
        built = ScanGraph(ix.settings, ix.pages)
        slots = np.arange(ix.pages.n, dtype=np.int64)
        built.build(slots[built.eligible(slots)])
        assert got[5] == built.view()[5]  # every node's band keys, as filed
        assert got[0] == built.view()[0] and any(got[0].values())


def test_a_batch_with_the_engines_lookups_is_the_batch_read_here(engine, saved, tmp_path):
    other = tmp_path / "read-here"
    shutil.copytree(saved, other)
    with ServiceIndex(other) as ix:
        want_report = ix.apply(_batch()).to_dict()
        want = {frozenset(m) for m in ix.groups.values()}
    with ServiceIndex(saved) as ix:
        prepared = ix.prepared(_batch())
        lookups = found_elsewhere(engine, ix, prepared)
        assert lookups is not HERE and lookups.band is not None and lookups.score is not None
        graph, pages = ix.scan_graph, ix.pages
        searched = graph.buckets.base_searches + graph.class_searches + pages.key_searches
        report = ix.apply_prepared(prepared, lookups=lookups).to_dict()
        # Nothing of the saved index was searched here: the engine found it all.
        assert graph.buckets.base_searches + graph.class_searches + pages.key_searches == searched
        got = {frozenset(m) for m in ix.groups.values()}
    assert got == want and any(len(g) > 1 for g in got)
    for key in ("new", "changed", "removed", "redirects", "tier2", "groups_touched"):
        assert report[key] == want_report[key], key
