"""The near and cluster stages by parts on the workers give the tables of the stages run in
the scanning process, row for row (issue 47).

One worker runs `near.run_near` and `clusters.run_clusters` in the scanning process, as
every scan did before; two workers run `steps.near_parts`, the bucket keys dealt into parts
(as many as the workers, or more when `PART_BYTES` asks for them). The corpus has what each
step must carry through the parts: near-duplicate groups at several edit rates, identical
copies under other URLs (equivalence classes, whose representative is the lowest page key),
short pages, and with a small bucket cap, large buckets whose chains follow the page keys.
With exact verification, every near pair's similarity is checked against a plain Python
Jaccard of the pages' shingle sets.
"""

from __future__ import annotations

import json
from functools import cache
from itertools import combinations
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from neardup import scan
from neardup.config import Settings
from neardup.kernels import canonical_shingles, canonicalize
from neardup.pipeline.steps import near_parts
from neardup.synth.corpus import Document, stdlib_documents
from neardup.synth.edits import edit_document, truncate_document

TABLES = ("pairs", "containment", "clusters", "pages")


def _text(doc: Document) -> str:
    return "\n\n".join([doc.title, *doc.paragraphs])


@cache
def corpus() -> tuple[tuple[str, str], ...]:
    """(url, text) rows: 8 groups of near-duplicates, identical copies and short pages."""
    rng = np.random.default_rng(47)
    rows: list[tuple[str, str]] = []
    for g, doc in enumerate(stdlib_documents(min_words=150, limit=8)):
        rows.append((f"https://site{g}.example/{doc.slug}", _text(doc)))
        for v, rate in enumerate((0.01, 0.03, 0.05, 0.08)):
            edited = edit_document(doc, rng, substitute_rate=rate)
            rows.append((f"https://mirror{v}.example/{g}/{doc.slug}", _text(edited)))
        for c in range(2):  # an equivalence class, its first copy not its representative
            rows.append((f"http://copy{c}.example/{doc.slug}?g={g}", _text(doc)))
        short = truncate_document(doc, 0.15)
        rows.append((f"https://short.example/{g}/a", _text(short)))
        rows.append((f"https://short.example/{g}/b", _text(edit_document(short, rng, 0, 0, 0.02))))
    return tuple(rows)


@pytest.fixture(scope="module")
def pages(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("near-parts") / "pages.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for url, text in corpus():
            fh.write(json.dumps({"url": url, "text": text}) + "\n")
    return path


def _scan(pages: Path, out: Path, settings: Settings, workers: int) -> Path:
    result = scan([pages], out, settings, workers=workers)
    assert not (result.path / near_parts.NEAR_DIR).exists()
    return result.path


SETTINGS = {
    "minhash": Settings(),
    "chains": Settings(max_bucket_pairs=2, cluster_rule="center"),
    "supershingles": Settings(method="supershingles"),
    "exact": Settings(verify="exact", threshold=0.7, cluster_rule="transitive"),
}


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_parts_on_workers_give_the_tables_of_one_process(name, pages, tmp_path, monkeypatch):
    settings = SETTINGS[name]
    one = _scan(pages, tmp_path / "one", settings, workers=1)
    two = _scan(pages, tmp_path / "two", settings, workers=2)
    # more parts than workers: each worker runs several parts of keys and of pairs
    monkeypatch.setattr(near_parts, "PART_BYTES", 4096)
    monkeypatch.setattr(near_parts, "KEY_ROWS", 7)
    many = _scan(pages, tmp_path / "many", settings, workers=2)
    pairs = pq.read_table(one / "pairs.parquet")
    assert pairs.num_rows > 20  # the corpus has near-duplicates to find
    assert "near" in pairs.column("kind").to_pylist()
    assert "identical" in pairs.column("kind").to_pylist()
    for table in TABLES:
        want = pq.read_table(one / f"{table}.parquet")
        assert pq.read_table(two / f"{table}.parquet").equals(want), table
        assert pq.read_table(many / f"{table}.parquet").equals(want), table
    summaries = [json.loads((run / "summary.json").read_text()) for run in (one, two, many)]
    for field in ("candidate_pairs", "candidate_pairs_emitted", "large_buckets", "verified_pairs"):
        assert len({s[field] for s in summaries}) == 1, field
    if name == "chains":
        assert summaries[0]["large_buckets"] > 0  # the cap made chains


def _shingle_set(text: str, settings: Settings) -> set[int]:
    return set(canonical_shingles(canonicalize(text), settings).tolist())


def test_exact_pairs_by_parts_are_the_plain_jaccard(pages, tmp_path):
    """Every near pair's similarity is the Jaccard of the two shingle sets, as Python sets
    compute it; every pair of distinct pages far above the threshold is in one component."""
    settings = SETTINGS["exact"]
    run = _scan(pages, tmp_path / "run", settings, workers=2)
    sets = [_shingle_set(text, settings) for _, text in corpus()]
    pairs = pq.read_table(run / "pairs.parquet").to_pylist()
    near = [p for p in pairs if p["kind"] == "near"]
    assert near
    for p in near:
        a, b = sets[p["doc_a"]], sets[p["doc_b"]]
        assert p["similarity"] == pytest.approx(len(a & b) / len(a | b), abs=1e-6)
        assert p["similarity"] >= settings.threshold
    assigned = pq.read_table(run / "pages.parquet", columns=["doc_id", "component_id"])
    component = dict(zip(*assigned.to_pydict().values(), strict=True))
    close = 0
    for i, j in combinations(range(len(sets)), 2):
        a, b = sets[i], sets[j]
        if a and b and len(a & b) / len(a | b) >= 0.95:
            close += 1
            assert component[i] == component[j], (i, j)
    assert close > 0
