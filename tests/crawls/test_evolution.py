"""Crawls over time: Φ/Ψ, change buckets, lost and found, on-the-fly resemblance."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from crawl_texts import edit_text, random_text
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.config import Settings, SettingsError
from neardup.crawls.evolution import change_buckets, evolution, phi_psi
from neardup.crawls.lost_found import find_moved, find_moved_all, query
from neardup.crawls.store import add_crawl, list_crawls


def _text(seed: int, n: int = 300) -> str:
    return random_text(seed, n)


_edit = edit_text


def _write(path: Path, pages: dict[str, str]) -> Path:
    with path.open("w") as fh:
        for url, text in pages.items():
            fh.write(json.dumps({"url": url, "text": text}) + "\n")
    return path


def test_phi_psi_hand_made() -> None:
    # m: {a, b, c} together, d alone; n: {a, b} together, {c, d} together, e new.
    t = phi_psi(["a", "b", "c", "d"], [1, 1, 1, 2], ["a", "b", "c", "d", "e"], [7, 7, 8, 8, 9])
    rows = {r["url"]: r for r in t.to_pylist()}
    assert set(rows) == {"a", "b", "c", "d"}
    assert rows["a"]["phi"] == pytest.approx(1.0)  # {a,b} ∩ {a,b,c} = 2 of |C_n| = 2
    assert rows["a"]["psi"] == pytest.approx(2 / 3)
    assert rows["c"]["phi"] == pytest.approx(0.5)  # {c} of {c, d}
    assert rows["c"]["psi"] == pytest.approx(1 / 4)  # {c} of {a, b, c, d}
    assert rows["d"]["phi"] == pytest.approx(0.5) and rows["d"]["psi"] == pytest.approx(0.5)
    assert rows["a"]["bucket"] == "2-10" and rows["d"]["bucket"] == "1"


def test_phi_psi_identical_clusterings_are_one() -> None:
    urls = [f"u{i}" for i in range(30)]
    labels = [i // 12 for i in range(30)]
    t = phi_psi(urls, labels, urls, labels)
    assert np.allclose(t["phi"].to_numpy(), 1.0) and np.allclose(t["psi"].to_numpy(), 1.0)
    assert set(t["bucket"].to_pylist()) == {"11-100", "2-10"}


def test_change_buckets_scale_fetterly() -> None:
    agree = np.array([0, 1, 28, 29, 56, 57, 83, 84, 85])
    assert change_buckets(agree, 84) == [
        "complete",
        "large",
        "large",
        "medium",
        "medium",
        "small",
        "small",
        "no text change",
        "no change",
    ]


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two crawls: 6 stable pages, a cluster of 3 copies, pages edited by known amounts, and
    one page moved to a new URL."""
    tmp = tmp_path_factory.mktemp("evo")
    base = {f"http://a.example/p{i}": _text(i) for i in range(6)}
    copy = _text(100)
    base |= {f"http://b.example/c{i}": copy for i in range(3)}
    base["http://a.example/edit-small"] = _text(200)
    base["http://a.example/edit-large"] = _text(201)
    base["http://a.example/old-place"] = _text(300)
    later = dict(base)
    later["http://a.example/edit-small"] = _edit(base["http://a.example/edit-small"], 0.05, 7)
    later["http://a.example/edit-large"] = _edit(base["http://a.example/edit-large"], 0.9, 8)
    later["http://a.example/new-place"] = later.pop("http://a.example/old-place")
    out = tmp / "store"
    settings = Settings(num_perm=84)
    add_crawl([_write(tmp / "m.jsonl", base)], out, "m", settings, workers=1)
    add_crawl([_write(tmp / "n.jsonl", later)], out, "n", settings, workers=1)
    return out


def test_store_lists_crawls(store: Path) -> None:
    crawls = list_crawls(store)
    assert [c["label"] for c in crawls] == ["m", "n"]
    assert (store / "crawls" / "n" / "band_keys.npy").exists()


def test_incompatible_settings_refused(store: Path, tmp_path: Path) -> None:
    with pytest.raises(SettingsError, match="num_perm"):
        add_crawl([tmp_path / "x.jsonl"], store, "x", Settings(num_perm=128))


def test_evolution_end_to_end(store: Path) -> None:
    result = evolution(store)
    phi = {r["url"]: r for r in result.phi_psi.to_pylist()}
    assert phi["http://b.example/c0"]["size_m"] == 3
    assert phi["http://b.example/c0"]["phi"] == pytest.approx(1.0)
    changes = {r["url"]: r for r in result.changes.to_pylist()}
    assert changes["http://a.example/p0"]["change"] == "no change"
    assert changes["http://a.example/edit-small"]["change"] in {"small", "medium"}
    assert changes["http://a.example/edit-large"]["change"] in {"complete", "large"}
    assert "http://a.example/old-place" not in changes
    assert result.hosts["share"][0].as_py() == pytest.approx(1.0)
    assert (store / "evolution_phi_psi.parquet").exists()
    assert (store / "evolution_changes.parquet").exists()


def test_find_moved(store: Path) -> None:
    hits = find_moved(store, "http://a.example/old-place")
    assert hits[0]["url"] == "http://a.example/new-place"
    assert hits[0]["resemblance"] == pytest.approx(1.0)
    table = find_moved_all(store)
    assert table.to_pylist() == [
        {
            "old_url": "http://a.example/old-place",
            "new_url": "http://a.example/new-place",
            "resemblance": 1.0,
        }
    ]


def test_query_unseen_document(store: Path, tmp_path: Path) -> None:
    doc = tmp_path / "excerpt.txt"
    doc.write_text(" ".join(_text(3).split()[50:200]))  # half of p3: contained, not resembling
    hits = query(store, doc, threshold=0.5)
    assert hits and hits[0]["url"] == "http://a.example/p3"
    assert hits[0]["containment"] == pytest.approx(1.0)
    unrelated = tmp_path / "other.txt"
    unrelated.write_text(_text(999))
    assert query(store, unrelated) == []
    by_url = query(store, "http://a.example/p1", crawl="m")
    assert by_url[0]["url"] == "http://a.example/p1"


def test_cli(store: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["evolution", str(store)])
    assert result.exit_code == 0, result.output
    assert "Page change" in result.output
    result = runner.invoke(app, ["find-moved", "--store", str(store), "--all", "--json"])
    assert result.exit_code == 0 and "new-place" in result.output
    result = runner.invoke(app, ["find-moved", "http://a.example/old-place", "--store", str(store)])
    assert result.exit_code == 0 and "new-place" in result.output
    result = runner.invoke(app, ["query", "http://a.example/p2", "--store", str(store), "--json"])
    assert result.exit_code == 0 and "p2" in result.output


def test_clusters_across_crawls_join_the_same_page_in_both_crawls(tmp_path):
    from neardup.crawls.cross_crawl import cross_crawl_clusters
    from neardup.crawls.store import add_crawl
    from neardup.synth import generate_demo_crawl

    crawl = generate_demo_crawl(tmp_path / "crawl", n_docs=30, seed=7)
    store = tmp_path / "store"
    add_crawl(crawl.warc_paths[:2], store, "a", workers=1)
    add_crawl(crawl.warc_paths[1:], store, "b", workers=1)
    table = cross_crawl_clusters(store).to_pylist()
    assert (store / "cross_clusters.parquet").exists()
    by_crawl: dict[str, dict[str, int]] = {"a": {}, "b": {}}
    for row in table:
        by_crawl[row["crawl"]][row["url"]] = row["cross_cluster_id"]
    shared = set(by_crawl["a"]) & set(by_crawl["b"])
    assert shared  # the middle WARC file is in both crawls
    # a page fetched identically in both crawls is one cluster across them
    assert all(by_crawl["a"][u] == by_crawl["b"][u] for u in shared)
    # every representative is a member of its own cluster
    reps = {row["cross_cluster_id"] for row in table}
    assert all(table[r]["cross_cluster_id"] == r for r in reps)


def test_a_store_keeps_the_sketch_it_started_with(tmp_path: Path) -> None:
    """A store begun with classic sketches (as every store before one-permutation hashing
    was) takes a crawl added without naming a sketch, from Python and from the command
    line; naming the other sketch is refused before any work."""
    from neardup.cli.main import app
    from neardup.crawls.store import stored_sketch
    from neardup.store import load_settings

    pages = {f"http://a.example/p{i}": _text(i) for i in range(8)}
    store = tmp_path / "store"
    add_crawl([_write(tmp_path / "a.jsonl", pages)], store, "a", Settings(sketch="classic"), 1)
    assert stored_sketch(store) == "classic"
    add_crawl([_write(tmp_path / "b.jsonl", pages)], store, "b", workers=1)
    runner = CliRunner()
    result = runner.invoke(
        app, ["crawl", str(_write(tmp_path / "c.jsonl", pages)), "-l", "c", "--store", str(store)]
    )
    assert result.exit_code == 0, result.output
    assert {load_settings(store / "crawls" / x).sketch for x in "abc"} == {"classic"}
    refused = runner.invoke(
        app,
        ["crawl", str(tmp_path / "c.jsonl"), "-l", "d", "--store", str(store), "--sketch", "oph"],
    )
    assert refused.exit_code == 2 and "sketch" in refused.output
    assert not (store / "crawls" / "d").exists()
