"""Every similarity method, end to end on a small hand-made table: each finds an exact copy
and a near copy, ignores an unrelated page, and writes the same run-directory tables; the
Broder sketches report an excerpt as contained in its source."""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import numpy as np
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import neardup
from neardup.cli.main import app
from neardup.config import METHODS, Settings

WORDS = [f"w{i}" for i in range(3000)]


def page(rng: np.random.Generator, lines: int = 80) -> list[str]:
    return [" ".join(rng.choice(WORDS, 10)) for _ in range(lines)]


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rng = np.random.default_rng(11)
    source = page(rng)
    near = list(source)
    near[40] = "an edited line " + near[40]
    rows = [
        ("http://a/source", "\n".join(source)),
        ("http://b/copy", "\n".join(source)),  # exact copy
        ("http://c/near", "\n".join(near)),  # one line edited
        ("http://d/unrelated", "\n".join(page(rng))),
        ("http://e/excerpt", "\n".join(source[:50])),  # contained in the source
        ("http://f/other", "\n".join(page(rng))),
    ]
    path = tmp_path_factory.mktemp("methods") / "pages.jsonl"
    path.write_text("".join(json.dumps({"url": u, "text": t}) + "\n" for u, t in rows))
    return path


def clusters(run: Path) -> dict[str, int | None]:
    rows = pq.read_table(run / "pages.parquet", columns=["url", "cluster_id"]).to_pylist()
    return {r["url"].split("/")[2]: r["cluster_id"] for r in rows}


@pytest.mark.parametrize("method", METHODS)
def test_every_method_finds_copies_and_ignores_unrelated_pages(
    method: str, table: Path, tmp_path: Path
) -> None:
    result = neardup.scan([table], tmp_path / "run", settings=Settings(method=method), workers=1)
    c = clusters(result.path)
    assert c["b"] == c["a"]  # the exact copy
    assert c["d"] != c["a"] and c["f"] != c["a"] and c["d"] != c["f"]
    if method != "exact":  # the exact baseline only knows identical texts
        assert c["c"] == c["a"], method
    pairs = pq.read_table(result.path / "pairs.parquet")
    assert pairs.schema.names == ["doc_a", "doc_b", "similarity", "supershingles_agree", "kind"]
    near = [r for r in pairs.to_pylist() if r["kind"] == "near"]
    assert all(0 < r["similarity"] <= 1 for r in near)
    assert result.summary["candidate_method"] == method
    settings = json.loads((result.path / "settings.json").read_text())
    assert settings["method"] == method
    assert pq.read_table(result.path / "containment.parquet").num_rows == 0


@pytest.mark.parametrize("method", ["broder-min", "broder-mod"])
def test_broder_sketches_report_containment(method: str, table: Path, tmp_path: Path) -> None:
    settings = Settings(method=method, containment=0.8)
    result = neardup.scan([table], tmp_path / "run", settings=settings, workers=1)
    rows = pq.read_table(result.path / "containment.parquet").to_pylist()
    # doc ids: 0 source, 2 near, 3 unrelated, 4 excerpt
    found = {(r["doc_small"], r["doc_large"]) for r in rows}
    assert (4, 0) in found or (4, 2) in found
    assert not any(3 in pair for pair in found)
    excerpt = [r for r in rows if r["doc_small"] == 4]
    assert all(r["containment"] >= 0.8 and r["resemblance"] < 0.8 for r in excerpt)
    assert result.summary["containment_pairs"] == len(rows)
    with duckdb.connect(str(result.path / "neardup.duckdb"), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM containment").fetchall()[0][0] == len(rows)


def test_both_iceberg_strategies_give_the_same_run(table: Path, tmp_path: Path) -> None:
    runs = {}
    for join in ("iceberg", "sort"):
        settings = Settings(method="chunks", chunking="lines2", chunk_join=join)
        runs[join] = neardup.scan([table], tmp_path / join, settings=settings, workers=1)
    a, b = (pq.read_table(r.path / "pairs.parquet") for r in runs.values())
    assert a.equals(b) and a.num_rows >= 2
    stats = runs["iceberg"].summary["method_stats"]
    assert stats["join"] == "iceberg" and stats["materialised_rows"] <= stats["join_rows"]


def test_cli_method_and_containment_options(table: Path, tmp_path: Path) -> None:
    out = tmp_path / "cli"
    args = ["scan", str(table), "--out", str(out), "--method", "broder-mod", "--workers", "1"]
    result = CliRunner().invoke(app, [*args, "--containment", "0.8", "--json", "-q"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["containment_pairs"] >= 1
    bad = CliRunner().invoke(
        app, ["scan", str(table), "--out", str(tmp_path / "x"), "--containment", "0.8"]
    )
    assert bad.exit_code == 2  # minhash cannot estimate containment
