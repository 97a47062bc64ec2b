"""`neardup add --engine spark` (`service/spark_feed.py`): the crawl read and sketched on
Spark's executors, a task a file, the batches applied to the index by this process.

Checked on the generated crawl (request-first WARCs with redirects, error pages, links and
near copies) against the scan of the same files (the reference the index did not compute)
and against the embedded engine's index: the same groups, the same winners, the same page
for page status, whichever engine added which file, and with pages removed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from run_groups import scan_groups
from spark_session import spark  # noqa: F401 - the fixture

from neardup.service import ServiceIndex
from neardup.service.feed import add_files


def _state(store: Path) -> dict[str, object]:
    """Every URL's status with its group named by its members, not by its number (numbers
    follow the batches, which differ between the engines), and the index's counts."""
    with ServiceIndex(store, read_only=True) as ix:
        out: dict[str, object] = {}
        for url in sorted(ix.pages):
            status = dict(ix.status(url) or {})
            gid = status.pop("group_id")
            status["group"] = None if gid is None else sorted(ix.groups.get(gid) or ())
            out[url] = status
        out["counts"] = ix.counts()
        return out


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
        gone = sorted(u for u in ix.pages if ix.status(u)["is_duplicate"])[:3]
    assert gone
    states = []
    for engine in ("embedded", "spark"):
        store = tmp_path / f"removed-{engine}"
        add_files(store, files, batch=5, engine=engine, workers=1)
        totals = add_files(store, [], engine=engine, remove=gone)
        assert totals["removed"] == len(gone)
        states.append(_state(store))
    assert states[0] == states[1]
    assert all(states[1][u]["removed"] for u in gone)


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
