"""Every command that reads a run works on a Spark-written one, whose tables are Parquet
datasets the executors wrote (folders of part files) behind DuckDB views, and gives what it
gives on the embedded engine's run of the same crawl."""

from __future__ import annotations

import json
import shutil
import urllib.request

import pyarrow.parquet as pq
import pytest
from door_server import serving
from spark_session import spark, spark_run  # noqa: F401 - the fixtures
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.store import open_run

runner = CliRunner()


def _json(*args: str) -> object:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, (args, result.output)
    return json.loads(result.stdout)


def _partition(run) -> set[frozenset[int]]:
    with open_run(run) as con:
        rows = con.execute(
            "SELECT list(doc_id) FROM pages WHERE cluster_id IS NOT NULL GROUP BY cluster_id"
        ).fetchall()
    return {frozenset(r[0]) for r in rows}


def test_spark_run_holds_datasets_behind_views(spark_run, demo_run):  # noqa: F811
    run = spark_run.path
    for table in ("pages", "page_text", "links", "pairs", "clusters", "sketches"):
        assert (run / f"{table}.parquet").is_dir(), table
    assert not (run / "signatures.npy").exists()
    assert _partition(run) == _partition(demo_run.path)
    with open_run(run) as con:
        kinds = dict(
            con.execute("SELECT table_name, table_type FROM information_schema.tables").fetchall()
        )
        assert kinds["pages"] == "VIEW" and kinds["page_text"] == "VIEW"
        n_text = con.execute("SELECT count(*) FROM page_text").fetchone()[0]
    assert n_text == pq.read_table(demo_run.path / "page_text.parquet").num_rows
    for key in ("records", "sketched", "clusters", "duplicates", "components", "skipped"):
        assert spark_run.summary[key] == demo_run.summary[key], key
    assert spark_run.summary["skipped_by_reason"] == demo_run.summary["skipped_by_reason"]


@pytest.mark.parametrize(
    "command",
    [
        ("clusters", "--top", "50"),
        ("collections",),
        ("collections", "--engine", "spark"),  # Spark SQL reading the datasets directly
        ("mirrors",),
        ("avoid-list",),
        ("summary",),
    ],
)
def test_commands_read_a_spark_run_as_an_embedded_one(command, spark_run, demo_run):  # noqa: F811
    name, *rest = command
    got = _json(name, str(spark_run.path), *rest)
    embedded_rest = [a for a in rest if a not in ("--engine", "spark")]
    expected = _json(name, str(demo_run.path), *embedded_rest)
    if name == "summary":  # the run's own figures: timings and the engine differ
        for key in ("records", "clusters", "duplicates", "verified_pairs", "pairs_rows"):
            assert got[key] == expected[key], key
        return
    assert got == expected
    assert got  # compared on real output, not on two empty lists


def test_dedup_report_and_ui_on_a_spark_run(spark_run, demo_run, demo_crawl, tmp_path):  # noqa: F811
    for run, name in ((spark_run.path, "spark"), (demo_run.path, "embedded")):
        out = tmp_path / f"clean-{name}"
        result = runner.invoke(app, ["dedup", "--run", str(run), "--out", str(out)])
        assert result.exit_code == 0, result.output
    kept = sorted(p.name for p in (tmp_path / "clean-spark").rglob("*") if p.is_file())
    assert kept == sorted(p.name for p in (tmp_path / "clean-embedded").rglob("*") if p.is_file())
    removed = (
        pq.read_table(tmp_path / "clean-spark" / "removed.parquet")
        if (tmp_path / "clean-spark" / "removed.parquet").exists()
        else None
    )
    if removed is not None:
        assert removed.equals(pq.read_table(tmp_path / "clean-embedded" / "removed.parquet"))

    report = tmp_path / "report.html"
    result = runner.invoke(app, ["report", str(spark_run.path), "-o", str(report)])
    assert result.exit_code == 0, result.output
    assert report.stat().st_size > 10_000

    pytest.importorskip("fastapi", reason="the service extra is not installed")
    from neardup.ui import create_app

    moved = tmp_path / "moved-run"  # a moved run still opens: views are relative to it
    shutil.copytree(spark_run.path, moved)
    with serving(create_app(moved, cache=tmp_path / "ui-cache")) as url:
        with urllib.request.urlopen(f"{url}/api/clusters") as reply:
            clusters = json.load(reply)
        assert clusters
        first = clusters[0] if isinstance(clusters, list) else clusters
        with urllib.request.urlopen(f"{url}/") as reply:
            assert reply.status == 200
        with urllib.request.urlopen(f"{url}/api/summary") as reply:
            assert json.load(reply)
        assert first
