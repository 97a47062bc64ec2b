"""A store of crawls takes crawls scanned by the Spark engine (Spark in local mode).

The same three generated crawls go into three stores: every crawl embedded, every crawl on
Spark (two of them through the command line), and mixed (the middle crawl on Spark). A Spark
crawl keeps the Parquet datasets its executors wrote, with no signature matrix; evolution,
lost and found, clusters across crawls and on-the-fly queries read them in place and give the
embedded store's answers row for row.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from crawl_texts import edit_text, random_text
from spark_session import spark  # noqa: F401 - the fixture
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.config import Settings, SettingsError
from neardup.crawls.cross_crawl import cross_crawl_clusters
from neardup.crawls.evolution import evolution
from neardup.crawls.lost_found import find_moved, find_moved_all, query
from neardup.crawls.store import add_crawl, crawl_dir, list_crawls

LABELS = ("A", "B", "C")
SETTINGS = Settings(num_perm=84)


def _text(seed: int, n: int = 200) -> str:
    return random_text(seed, n)


_edit = edit_text


def _crawls() -> dict[str, dict[str, str]]:
    """Three crawls of ~150 pages each, label -> URL -> text: stable pages on five hosts, a
    cluster of copies that loses two members and later gains three, a cluster of near
    copies, pages edited by known amounts, pages moved to new URLs (some edited on the way),
    pages gone for good and new pages."""
    a: dict[str, str] = {f"http://h{i % 5}.example/s{i}": _text(i) for i in range(80)}
    a |= {f"http://copies.example/c{i}": _text(1000) for i in range(6)}
    near = _text(1001)
    a |= {f"http://near.example/d{i}": _edit(near, 0.02 * (i % 2), 50 + i) for i in range(4)}
    a |= {f"http://h1.example/e{i}": _text(2000 + i) for i in range(10)}
    a |= {f"http://h2.example/old{i}": _text(3000 + i) for i in range(5)}
    a |= {f"http://h3.example/gone{i}": _text(4000 + i) for i in range(5)}
    b = {u: t for u, t in a.items() if "/gone" not in u and "/old" not in u}
    b["http://copies.example/c4"] = _text(1004)
    b["http://copies.example/c5"] = _text(1005)
    for i in range(10):
        b[f"http://h1.example/e{i}"] = _edit(a[f"http://h1.example/e{i}"], i / 10, 60 + i)
    for i in range(5):
        moved = a[f"http://h2.example/old{i}"]
        b[f"http://h4.example/new{i}"] = moved if i < 3 else _edit(moved, 0.05, 70 + i)
    b |= {f"http://h0.example/n{i}": _text(5000 + i) for i in range(20)}
    c = dict(b)
    for i in range(3):
        c[f"http://h{i}.example/s{i}"] = _text(1000)  # three stable pages join the copies
    for i in range(0, 10, 2):
        c[f"http://h1.example/e{i}"] = _edit(b[f"http://h1.example/e{i}"], 0.3, 80 + i)
    c["http://h3.example/moved-again"] = c.pop("http://h4.example/new0")
    return {"A": a, "B": b, "C": c}


def _write(path: Path, pages: dict[str, str], month: int) -> Path:
    with path.open("w") as fh:
        for day, (url, text) in enumerate(pages.items()):
            fetched = f"2024-{month:02d}-{1 + day % 28:02d}T12:00:00Z"
            fh.write(json.dumps({"url": url, "text": text, "fetched_at": fetched}) + "\n")
    return path


def _cli(*args: str) -> None:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def stores(spark, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:  # noqa: F811
    """{embedded, spark, mixed}: the same three crawls in three stores."""
    tmp = tmp_path_factory.mktemp("spark-crawls")
    files = {
        label: _write(tmp / f"{label}.jsonl", pages, month)
        for month, (label, pages) in enumerate(_crawls().items(), start=1)
    }
    out = {name: tmp / name for name in ("embedded", "spark", "mixed")}
    for label in LABELS:
        add_crawl([files[label]], out["embedded"], label, SETTINGS, workers=1)
        engine = "spark" if label == "B" else "embedded"
        add_crawl([files[label]], out["mixed"], label, SETTINGS, workers=1, engine=engine)
    add_crawl([files["A"]], out["spark"], "A", SETTINGS, engine="spark")
    spark_options = ["--engine", "spark", "--num-perm", "84", "--json"]
    _cli("crawl", str(files["B"]), "-l", "B", "--store", str(out["spark"]), *spark_options)
    _cli("scan", str(files["C"]), "-o", str(out["spark"]), "--crawl", "C", *spark_options)
    return out


def _spark_crawls(stores: dict[str, Path]) -> list[Path]:
    mixed = [crawl_dir(stores["mixed"], "B")]
    return [crawl_dir(stores["spark"], label) for label in LABELS] + mixed


def test_spark_crawls_keep_their_datasets(stores: dict[str, Path]) -> None:
    for run in _spark_crawls(stores):
        for table in ("pages", "page_text", "sketches"):
            assert (run / f"{table}.parquet").is_dir(), (run, table)  # read in place
        assert not (run / "signatures.npy").exists(), run  # no matrix through the driver
        assert (run / "band_keys.npy").exists() and (run / "band_docs.npy").exists(), run
    assert (crawl_dir(stores["mixed"], "A") / "signatures.npy").exists()  # embedded
    expected = list_crawls(stores["embedded"])
    assert [c["label"] for c in expected] == list(LABELS)
    assert expected[0]["fetched_from"] == "2024-01-01T12:00:00Z"
    for name in ("spark", "mixed"):
        assert list_crawls(stores[name]) == expected, name


def test_band_indexes_are_the_embedded_ones(stores: dict[str, Path]) -> None:
    for label in LABELS:
        embedded = crawl_dir(stores["embedded"], label)
        spark_run = crawl_dir(stores["spark"], label)
        for name in ("band_keys.npy", "band_rows.npy", "band_docs.npy", "band_index.json"):
            assert (embedded / name).read_bytes() == (spark_run / name).read_bytes(), name


def test_evolution_is_the_embedded_one_row_for_row(stores: dict[str, Path]) -> None:
    expected = evolution(stores["embedded"])
    assert expected.phi_psi.num_rows > 100 and expected.changes.num_rows > 100
    changes = set(expected.changes["change"].to_pylist())
    assert {"no change", "small", "complete"} <= changes  # real change, not empty tables
    for name in ("spark", "mixed"):
        got = evolution(stores[name])
        for table in ("phi_psi", "changes", "phi_psi_summary", "change_summary", "hosts"):
            rows = getattr(expected, table).to_pylist()
            assert getattr(got, table).to_pylist() == rows, (name, table)
        for written in ("evolution_phi_psi.parquet", "evolution_changes.parquet"):
            a = pq.read_table(stores["embedded"] / written).to_pylist()
            assert pq.read_table(stores[name] / written).to_pylist() == a, (name, written)


def test_lost_and_found_is_the_embedded_one(stores: dict[str, Path]) -> None:
    expected = find_moved_all(stores["embedded"]).to_pylist()
    found = {r["old_url"]: r["new_url"] for r in expected}
    assert found["http://h4.example/new0"] == "http://h3.example/moved-again"
    one = find_moved(stores["embedded"], "http://h2.example/old3")
    assert one and one[0]["url"] == "http://h4.example/new3"  # moved in B, edited by 5 %
    for name in ("spark", "mixed"):
        assert find_moved_all(stores[name]).to_pylist() == expected, name
        assert pq.read_table(stores[name] / "moved.parquet").to_pylist() == expected, name
        assert find_moved(stores[name], "http://h2.example/old3") == one, name


def test_clusters_across_crawls_are_the_embedded_ones(stores: dict[str, Path]) -> None:
    expected = cross_crawl_clusters(stores["embedded"]).to_pylist()
    copies = {r["cross_cluster_id"] for r in expected if r["url"].endswith("/c0")}
    assert len(copies) == 1  # the same copy in every crawl: one cluster across the three
    assert {r["crawl"] for r in expected if r["cross_cluster_id"] in copies} == set(LABELS)
    for name in ("spark", "mixed"):
        assert cross_crawl_clusters(stores[name]).to_pylist() == expected, name


def test_queries_read_a_spark_crawls_text(stores: dict[str, Path], tmp_path: Path) -> None:
    doc = tmp_path / "excerpt.txt"
    doc.write_text(" ".join(_text(7).split()[40:160]))  # inside s7: contained, not resembling
    expected = query(stores["embedded"], doc)
    assert expected and expected[0]["url"] == "http://h2.example/s7"
    by_url = query(stores["embedded"], "http://h1.example/e3", crawl="B")
    assert by_url and by_url[0]["url"] == "http://h1.example/e3"
    for name in ("spark", "mixed"):
        assert query(stores[name], doc) == expected, name
        assert query(stores[name], "http://h1.example/e3", crawl="B") == by_url, name


def test_cli_evolution_on_a_spark_store(stores: dict[str, Path]) -> None:
    def printed(store: Path) -> object:
        result = CliRunner().invoke(app, ["evolution", str(store), "--json"])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    expected = printed(stores["embedded"])
    assert expected["clusters_spanning_crawls"] > 0
    assert printed(stores["spark"]) == expected


def test_a_spark_crawl_must_compare_with_the_store(stores: dict[str, Path], tmp_path) -> None:
    """The settings check across crawls holds for Spark crawls, before any work."""
    with pytest.raises(SettingsError, match="num_perm"):
        add_crawl(
            [tmp_path / "x.jsonl"], stores["spark"], "x", Settings(num_perm=128), engine="spark"
        )
    args = ["crawl", str(tmp_path / "x.jsonl"), "-l", "x", "--store", str(stores["spark"])]
    result = CliRunner().invoke(app, [*args, "--engine", "spark", "--num-perm", "128"])
    assert result.exit_code != 0 and "num_perm" in result.output
    assert [c["label"] for c in list_crawls(stores["spark"])] == list(LABELS)
