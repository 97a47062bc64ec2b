"""Cumulative (first -> n) and consecutive ((n-1) -> n) comparisons of three crawls.

The store is hand-made: every page is one of five unrelated texts, so two pages are in the
same cluster exactly when they carry the same text, and the clusterings of each crawl are
known before the scan. The expected Φ, Ψ and host figures are computed here with Python sets
from those clusterings, independently of the SQL in `neardup.crawls/sql`.
"""

from __future__ import annotations

import json
import random
from collections import defaultdict
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.config import Settings
from neardup.crawls.evolution import comparisons, evolution
from neardup.crawls.store import add_crawl, crawl_dir

WORDS = [f"w{i}" for i in range(5000)]
# Crawl label -> URL -> text id. A: {a,b,c} {d} {e}; B: c joins d; C: b leaves, e joins c, d.
THREE_CRAWLS: dict[str, dict[str, int]] = {
    "A": {"x/a": 1, "x/b": 1, "x/c": 1, "y/d": 2, "y/e": 3},
    "B": {"x/a": 1, "x/b": 1, "x/c": 2, "y/d": 2, "y/e": 3},
    "C": {"x/a": 1, "x/b": 4, "x/c": 2, "y/d": 2, "y/e": 2},
}


def _text(seed: int, n: int = 300) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def url_of(key: str) -> str:
    host, path = key.split("/")
    return f"http://{host}.example/{path}"


def write_store(out: Path, crawls: dict[str, dict[str, int]]) -> Path:
    """A store with one crawl per entry of `crawls`, in order; pages as JSONL text rows."""
    texts = {i: _text(i) for pages in crawls.values() for i in pages.values()}
    store = out / "store"
    for label, pages in crawls.items():
        path = out / f"{label}.jsonl"
        with path.open("w") as fh:
            for key, text_id in pages.items():
                fh.write(json.dumps({"url": url_of(key), "text": texts[text_id]}) + "\n")
        add_crawl([path], store, label, Settings(num_perm=84), workers=1)
    return store


def partition(pages: dict[str, int]) -> dict[str, frozenset[str]]:
    """URL -> the set of URLs carrying the same text (its intended cluster)."""
    by_text: dict[int, set[str]] = defaultdict(set)
    for key, text_id in pages.items():
        by_text[text_id].add(url_of(key))
    return {u: frozenset(group) for group in by_text.values() for u in group}


def size_bucket(size: int) -> str:
    """Fetterly's size ranges 1, 2-10, 11-100, … written out independently of the SQL."""
    if size == 1:
        return "1"
    digits = len(str(size - 1))
    return f"{10 ** (digits - 1) + 1}-{10**digits}"


def expected_phi_psi(
    cm: dict[str, frozenset[str]], cn: dict[str, frozenset[str]]
) -> dict[str, tuple[float, float, str]]:
    """URL -> (Φ, Ψ, size bucket in m) by the paper's set definitions."""
    out = {}
    for u in cm.keys() & cn.keys():
        common = len(cm[u] & cn[u])
        out[u] = (common / len(cn[u]), common / len(cm[u] | cn[u]), size_bucket(len(cm[u])))
    return out


def expected_hosts(cm: dict[str, frozenset[str]], cn: dict[str, frozenset[str]]) -> tuple:
    """(hosts in both, hosts in the same number of distinct clusters)."""

    def clusters_per_host(c: dict[str, frozenset[str]]) -> dict[str, int]:
        seen: dict[str, set[frozenset[str]]] = defaultdict(set)
        for u, cluster in c.items():
            seen[u.split("/")[2]].add(cluster)
        return {h: len(s) for h, s in seen.items()}

    hm, hn = clusters_per_host(cm), clusters_per_host(cn)
    both = hm.keys() & hn.keys()
    return len(both), sum(hm[h] == hn[h] for h in both)


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_store(tmp_path_factory.mktemp("evo3"), THREE_CRAWLS)


def scanned_partition(store: Path, label: str) -> dict[str, frozenset[str]]:
    """URL -> URLs of its cluster, as the scan of crawl `label` stored them."""
    pages = pq.read_table(crawl_dir(store, label) / "pages.parquet").to_pylist()
    groups: dict[int, set[str]] = defaultdict(set)
    for p in pages:
        groups[p["cluster_id"] if p["cluster_id"] is not None else -p["doc_id"] - 1].add(p["url"])
    return {u: frozenset(g) for g in groups.values() for u in g}


def test_comparisons_are_cumulative_and_consecutive() -> None:
    pairs = [(c.m, c.n, c.consecutive, c.cumulative) for c in comparisons(4)]
    assert pairs == [
        (0, 1, True, True),
        (0, 2, False, True),
        (1, 2, True, False),
        (0, 3, False, True),
        (2, 3, True, False),
    ]
    assert comparisons(1) == []


def test_scan_found_the_hand_made_clusters(three: Path) -> None:
    for label, pages in THREE_CRAWLS.items():
        assert scanned_partition(three, label) == partition(pages)


def test_three_crawls_phi_psi_cumulative_and_consecutive(three: Path) -> None:
    result = evolution(three)
    rows = result.phi_psi.to_pylist()
    pairs = {(r["crawl_m"], r["crawl_n"], r["consecutive"], r["cumulative"]) for r in rows}
    assert pairs == {("A", "B", True, True), ("A", "C", False, True), ("B", "C", True, False)}
    for m, n, _, _ in pairs:
        expected = expected_phi_psi(partition(THREE_CRAWLS[m]), partition(THREE_CRAWLS[n]))
        got = {r["url"]: r for r in rows if (r["crawl_m"], r["crawl_n"]) == (m, n)}
        assert got.keys() == expected.keys()
        for url, (phi, psi, bucket) in expected.items():
            assert got[url]["phi"] == pytest.approx(phi), (m, n, url)
            assert got[url]["psi"] == pytest.approx(psi), (m, n, url)
            assert got[url]["bucket"] == bucket
        summary = [
            r for r in result.phi_psi_summary.to_pylist() if (r["crawl_m"], r["crawl_n"]) == (m, n)
        ]
        for r in summary:
            members = [v for v in expected.values() if v[2] == r["bucket"]]
            assert r["urls"] == len(members)
            assert r["phi"] == pytest.approx(sum(v[0] for v in members) / len(members))
            assert r["psi"] == pytest.approx(sum(v[1] for v in members) / len(members))
    # By hand, first -> last: a, b, c were together in A; in C, a and b are alone and c is
    # with d and e, so Φ averages (1 + 1 + 1/3) / 3 and Ψ (1/3 + 1/3 + 1/5) / 3.
    first_last = {
        r["bucket"]: r
        for r in result.phi_psi_summary.to_pylist()
        if (r["crawl_m"], r["crawl_n"]) == ("A", "C")
    }
    assert first_last["2-10"]["phi"] == pytest.approx(7 / 9)
    assert first_last["2-10"]["psi"] == pytest.approx(13 / 45)


def test_three_crawls_hosts_and_changes(three: Path) -> None:
    result = evolution(three)
    for r in result.hosts.to_pylist():
        cm, cn = partition(THREE_CRAWLS[r["crawl_m"]]), partition(THREE_CRAWLS[r["crawl_n"]])
        assert (r["hosts"], r["same_clusters"]) == expected_hosts(cm, cn)
    for r in result.changes.to_pylist():
        key = r["url"].split("//")[1].replace(".example", "")
        same = THREE_CRAWLS[r["crawl_m"]][key] == THREE_CRAWLS[r["crawl_n"]][key]
        # Unrelated random texts share no shingle: at most a stray min-hash agrees.
        assert r["change"] == "no change" if same else r["change"] in {"complete", "large"}
    overall = [r for r in result.change_summary.to_pylist() if r["bucket"] == "all"]
    for m, n in (("A", "B"), ("A", "C"), ("B", "C")):
        rows = {r["change"]: r["urls"] for r in overall if (r["crawl_m"], r["crawl_n"]) == (m, n)}
        unchanged = sum(THREE_CRAWLS[m][k] == THREE_CRAWLS[n][k] for k in THREE_CRAWLS[m])
        assert rows.get("no change", 0) == unchanged
        assert sum(rows.values()) == len(THREE_CRAWLS[m])


def test_parquet_outputs_hold_both_kinds(three: Path) -> None:
    evolution(three)
    for name in ("evolution_phi_psi.parquet", "evolution_changes.parquet"):
        table = pq.read_table(three / name).to_pylist()
        kinds = {(r["crawl_m"], r["crawl_n"]): (r["consecutive"], r["cumulative"]) for r in table}
        assert kinds == {
            ("A", "B"): (True, True),
            ("A", "C"): (False, True),
            ("B", "C"): (True, False),
        }
        assert len(table) == 3 * len(THREE_CRAWLS["A"])  # each pair of crawls once, not twice


def test_cli_prints_both_kinds(three: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["evolution", str(three)])
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # rich wraps long titles
    for what in ("Φ and Ψ by cluster size in crawl m", "Page change by cluster size in crawl m"):
        assert f"{what} — cumulative: first crawl → n" in text
        assert f"{what} — consecutive: n − 1 → n" in text
    result = runner.invoke(app, ["evolution", str(three), "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)["phi_psi"]
    assert {(r["crawl_m"], r["crawl_n"], r["cumulative"], r["consecutive"]) for r in rows} == {
        ("A", "B", True, True),
        ("A", "C", True, False),
        ("B", "C", False, True),
    }


def test_cli_two_crawls_print_one_block(tmp_path: Path) -> None:
    store = write_store(tmp_path, {k: THREE_CRAWLS[k] for k in ("A", "B")})
    result = CliRunner().invoke(app, ["evolution", str(store)])
    assert result.exit_code == 0, result.output
    assert "cumulative" not in result.output and "consecutive" not in result.output
    assert result.output.count("Φ and Ψ") == 1
