"""Accuracy benchmark: a scan's clusters against exact word-shingle Jaccard of all page pairs.

Input is a run directory written by `neardup scan`: `pages.parquet` (doc_id, url, host,
cluster_id - NULL for pages that were not sketched -, is_representative, skipped_reason and,
when present, component_id) and `page_text.parquet` (doc_id, text). Every pair of sketched
pages gets its exact resemblance |A∩B| / |A∪B| over 5-word shingles of the canonical text,
by brute force: a sparse page×shingle incidence matrix A, intersections from A·Aᵀ in row
blocks (memory stays bounded by one block's products), unions as |A| + |B| - |A∩B|.

Reported, for `cluster_id` and (when present) the transitive `component_id` view:
  recall        share of pairs with Jaccard >= 0.9 whose pages share a cluster;
  wrong merges  same-cluster pairs with Jaccard < 0.5, as a share of all same-cluster pairs
                and as a share of all pairs with Jaccard < 0.5.
Targets (issue): recall >= 0.98, wrong merges <= 0.5 % of same-cluster pairs.

    python bench/accuracy.py RUN_DIR [--text page_text.parquet] [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import scipy.sparse as sp

SRC = Path(__file__).resolve().parents[1] / "src"
RECALL_TARGET = 0.98
WRONG_MERGE_TARGET = 0.005
_P = np.uint64(0x9E3779B97F4A7C15)


def _fallback_canonicalize(text: str) -> str:
    """FALLBACK ONLY (used when neardup.kernels is unavailable): lower-cased alphanumeric
    words joined by single spaces, close to the project's canonical form."""
    out = "".join(ch.lower() if ch.isalnum() else " " for ch in text)
    return " ".join(out.split())


def _mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser on a uint64 array (a bijection, so it adds no collisions)."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def _fallback_shingle_hashes(canonical: str, size: int, wrap: bool, seed: int) -> np.ndarray:
    """FALLBACK ONLY: 64-bit hashes of the `size`-word shingles of a canonical text.

    Words are numbered through a process-wide vocabulary and each shingle's ids are mixed
    into one 64-bit value, so hashes are comparable between the pages of one run (all an
    exact Jaccard needs) and collide with negligible probability. A text shorter than `size`
    words is one shingle.
    """
    words = canonical.split()
    if not words:
        return np.empty(0, dtype=np.uint64)
    if wrap and len(words) >= size:
        words = words + words[: size - 1]
    ids = np.fromiter((_VOCAB.setdefault(w, len(_VOCAB)) for w in words), np.uint64, len(words))
    width = min(size, ids.size)
    n = ids.size - width + 1
    h = np.full(n, np.uint64(seed), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for k in range(width):
            h = _mix64(h ^ (ids[k : k + n] + _P))
    return h


_VOCAB: dict[str, int] = {}


def shingle_backend() -> tuple[Callable[[str], str], Callable[..., np.ndarray], str]:
    """(canonicalize, shingle_hashes, name): the project's own functions when importable,
    so the benchmark measures against exactly the shingles the pipeline uses."""
    try:
        from neardup.kernels import canonicalize, shingle_hashes
    except ImportError:
        if str(SRC) not in sys.path:
            sys.path.insert(0, str(SRC))
        try:
            from neardup.kernels import canonicalize, shingle_hashes
        except ImportError:
            return _fallback_canonicalize, _fallback_shingle_hashes, "fallback"
    return canonicalize, shingle_hashes, "neardup.kernels"


def shingle_sets(
    texts: Sequence[str], size: int = 5, seed: int = 1, backend: tuple | None = None
) -> list[np.ndarray]:
    """Sorted unique shingle hashes of each text."""
    canonicalize, shingle_hashes, _ = backend or shingle_backend()
    out = []
    for text in texts:
        hashes = np.asarray(shingle_hashes(canonicalize(text or ""), size, False, seed))
        out.append(np.unique(hashes))
    return out


def incidence_matrix(sets: Sequence[np.ndarray]) -> sp.csr_matrix:
    """Page × shingle 0/1 matrix; shingle hashes are mapped to columns by np.unique."""
    sizes = np.fromiter((s.size for s in sets), np.int64, len(sets))
    if sizes.sum() == 0:
        return sp.csr_matrix((len(sets), 0), dtype=np.int32)
    flat = np.concatenate([np.asarray(s).view(np.uint64) for s in sets])
    _, inverse = np.unique(flat, return_inverse=True)
    del flat
    index = np.int32 if inverse.size < 2**31 else np.int64  # scipy keeps int32 when it can
    cols = inverse.astype(index)
    del inverse
    indptr = np.zeros(len(sets) + 1, dtype=index)
    np.cumsum(sizes, out=indptr[1:])
    data = np.ones(cols.size, dtype=np.int32)
    return sp.csr_matrix((data, cols, indptr), shape=(len(sets), int(cols.max()) + 1))


def exact_pairs(
    matrix: sp.csr_matrix, min_jaccard: float = 0.5, block_rows: int = 256
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(i, j, jaccard) of every pair i < j with Jaccard >= `min_jaccard`, by brute force.

    Each block of rows is multiplied with the whole transposed matrix; only the pairs at or
    above the floor are kept, so memory is one block's products plus the result.
    """
    sizes = np.diff(matrix.indptr).astype(np.int64)
    transposed = matrix.T.tocsr()
    out_i, out_j, out_s = [], [], []
    for start in range(0, matrix.shape[0], block_rows):
        coo = (matrix[start : start + block_rows] @ transposed).tocoo()
        i = coo.row.astype(np.int64) + start
        j = coo.col.astype(np.int64)
        upper = j > i
        i, j, inter = i[upper], j[upper], coo.data[upper].astype(np.int64)
        sim = inter / np.maximum(sizes[i] + sizes[j] - inter, 1)
        keep = sim >= min_jaccard
        out_i.append(i[keep])
        out_j.append(j[keep])
        out_s.append(sim[keep])
    if not out_i:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0)
    return np.concatenate(out_i), np.concatenate(out_j), np.concatenate(out_s)


@dataclass
class ViewResult:
    """Accuracy of one clustering view (`cluster_id` or `component_id`)."""

    view: str
    pages: int
    high_pairs: int  # pairs with Jaccard >= high
    high_pairs_together: int
    recall: float | None
    same_cluster_pairs: int
    wrong_merges: int  # same-cluster pairs with Jaccard < low
    wrong_merge_share: float | None  # of same-cluster pairs
    low_pairs: int  # all pairs with Jaccard < low
    wrong_merge_share_of_low: float | None
    gray_pairs_together: int  # same-cluster pairs with low <= Jaccard < high
    missed_examples: list[dict] = field(default_factory=list)
    wrong_merge_examples: list[dict] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        recall_ok = self.recall is None or self.recall >= RECALL_TARGET
        merge_ok = self.wrong_merge_share is None or self.wrong_merge_share <= WRONG_MERGE_TARGET
        return recall_ok and merge_ok


def _same_cluster_pairs(labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """All pairs i < j with equal labels (for examples only: may be many)."""
    order = np.argsort(labels, kind="stable")
    sorted_labels = labels[order]
    bounds = np.flatnonzero(np.diff(sorted_labels)) + 1
    out_i, out_j = [], []
    for members in np.split(order, bounds):
        if members.size > 1:
            a, b = np.triu_indices(members.size, 1)
            lo, hi = np.minimum(members[a], members[b]), np.maximum(members[a], members[b])
            out_i.append(lo)
            out_j.append(hi)
    if not out_i:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(out_i), np.concatenate(out_j)


def evaluate(
    view: str,
    labels: np.ndarray,
    pairs: tuple[np.ndarray, np.ndarray, np.ndarray],
    high: float = 0.9,
    low: float = 0.5,
    urls: Sequence[str] | None = None,
    examples: int = 10,
    max_enumerated_pairs: int = 20_000_000,
) -> ViewResult:
    """Score cluster labels (one per page) against the exact pairs with Jaccard >= `low`."""
    n = labels.size
    i, j, sim = pairs
    if sim.size and sim.min() < low:
        raise ValueError("pairs must hold every pair with Jaccard >= low, and only those")
    together = labels[i] == labels[j]
    hi = sim >= high
    _, counts = np.unique(labels, return_counts=True)
    same_total = int((counts * (counts - 1) // 2).sum())
    same_at_least_low = int(together.sum())
    wrong = same_total - same_at_least_low
    low_pairs = n * (n - 1) // 2 - int(sim.size)
    result = ViewResult(
        view=view,
        pages=n,
        high_pairs=int(hi.sum()),
        high_pairs_together=int((hi & together).sum()),
        recall=float((hi & together).sum() / hi.sum()) if hi.any() else None,
        same_cluster_pairs=same_total,
        wrong_merges=wrong,
        wrong_merge_share=wrong / same_total if same_total else None,
        low_pairs=low_pairs,
        wrong_merge_share_of_low=wrong / low_pairs if low_pairs else None,
        gray_pairs_together=int((together & ~hi).sum()),
    )
    name = (lambda k: urls[k]) if urls is not None else (lambda k: int(k))
    missed = np.flatnonzero(hi & ~together)
    missed = missed[np.argsort(-sim[missed], kind="stable")][:examples]
    result.missed_examples = [
        {"a": name(i[k]), "b": name(j[k]), "jaccard": round(float(sim[k]), 4)} for k in missed
    ]
    if wrong and same_total <= max_enumerated_pairs:
        si, sj = _same_cluster_pairs(labels)
        known = np.isin(si * n + sj, i * n + j)
        bad = np.flatnonzero(~known)[:examples]
        result.wrong_merge_examples = [{"a": name(si[k]), "b": name(sj[k])} for k in bad]
    return result


def load_run(run_dir: Path, text_path: Path | None = None) -> tuple[dict, list[str]]:
    """Columns of the sketched pages (doc_id, url, cluster_id, component_id?) and their texts."""
    pages = pq.read_table(run_dir / "pages.parquet")
    mask = pc.is_valid(pages["cluster_id"])
    if "skipped_reason" in pages.column_names:
        mask = pc.and_(mask, pc.is_null(pages["skipped_reason"]))
    pages = pages.filter(mask).sort_by("doc_id")
    text_path = text_path or run_dir / "page_text.parquet"
    if not text_path.exists():
        raise SystemExit(
            f"{text_path} not found: pass --text with the page_text.parquet of the run"
        )
    doc_ids = pages["doc_id"].to_pylist()
    texts = pq.read_table(
        text_path, columns=["doc_id", "text"], filters=[("doc_id", "in", doc_ids)]
    )
    by_id = dict(zip(texts["doc_id"].to_pylist(), texts["text"].to_pylist(), strict=True))
    del texts
    missing = [d for d in doc_ids if d not in by_id]
    if missing:
        raise SystemExit(f"{len(missing)} sketched pages have no text, e.g. doc_id {missing[0]}")
    cols = {
        "doc_id": np.asarray(doc_ids, dtype=np.int64),
        "url": pages["url"].to_pylist() if "url" in pages.column_names else None,
        "cluster_id": pages["cluster_id"].to_numpy(),
    }
    if "component_id" in pages.column_names:
        cols["component_id"] = pages["component_id"].fill_null(-1).to_numpy()
    return cols, [by_id[d] for d in doc_ids]


def run_settings(run_dir: Path) -> dict:
    path = run_dir / "settings.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def _fmt(x: float | None, pct: bool = False) -> str:
    if x is None:
        return "n/a"
    return f"{100 * x:.3f} %" if pct else f"{x:.4f}"


def markdown(results: list[ViewResult], high: float, low: float) -> str:
    lines = [
        f"| view | pages | pairs J>={high:g} | recall | same-cluster pairs | "
        f"wrong merges (J<{low:g}) | share of same-cluster | share of all J<{low:g} | "
        f"same-cluster {low:g}<=J<{high:g} | target met |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.view} | {r.pages} | {r.high_pairs} | {_fmt(r.recall)} | "
            f"{r.same_cluster_pairs} | {r.wrong_merges} | {_fmt(r.wrong_merge_share, True)} | "
            f"{_fmt(r.wrong_merge_share_of_low, True)} | {r.gray_pairs_together} | "
            f"{'yes' if r.passed else 'NO'} |"
        )
    lines.append("")
    lines.append(
        f"Targets: recall >= {RECALL_TARGET:g}, wrong merges <= {100 * WRONG_MERGE_TARGET:g} % "
        "of same-cluster pairs."
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--text", type=Path, help="page_text.parquet (default: in run_dir)")
    parser.add_argument("--json", type=Path, help="write machine-readable results here")
    parser.add_argument("--shingle-size", type=int, help="default: the run's settings, or 5")
    parser.add_argument("--seed", type=int, help="default: the run's settings, or 1")
    parser.add_argument("--high", type=float, default=0.9)
    parser.add_argument("--low", type=float, default=0.5)
    parser.add_argument("--block-rows", type=int, default=256)
    parser.add_argument("--examples", type=int, default=10)
    args = parser.parse_args(argv)
    started = time.perf_counter()
    settings = run_settings(args.run_dir)
    size = args.shingle_size or int(settings.get("shingle_size", 5))
    seed = args.seed if args.seed is not None else int(settings.get("seed", 1))
    cols, texts = load_run(args.run_dir, args.text)
    backend = shingle_backend()
    n_texts = len(texts)
    sets = shingle_sets(texts, size, seed, backend)
    del texts
    nonempty = np.fromiter((s.size > 0 for s in sets), bool, len(sets))
    keep = np.flatnonzero(nonempty)
    matrix = incidence_matrix([sets[k] for k in keep])
    del sets
    pairs = exact_pairs(matrix, args.low, args.block_rows)
    urls = [cols["url"][k] for k in keep] if cols["url"] is not None else None
    views = [v for v in ("cluster_id", "component_id") if v in cols]
    results = [
        evaluate(v, cols[v][keep], pairs, args.high, args.low, urls, args.examples) for v in views
    ]
    elapsed = time.perf_counter() - started
    print(markdown(results, args.high, args.low))
    print(
        f"\n{n_texts} sketched pages ({int((~nonempty).sum())} without shingles left out), "
        f"{matrix.nnz} shingle incidences, {pairs[0].size} pairs with J>={args.low:g}; "
        f"shingles: {backend[2]} (w={size}); {elapsed:.1f}s"
    )
    if args.json:
        payload = {
            "run_dir": str(args.run_dir),
            "shingle_size": size,
            "seed": seed,
            "shingle_backend": backend[2],
            "high": args.high,
            "low": args.low,
            "pages_without_shingles": int((~nonempty).sum()),
            "pairs_at_least_low": int(pairs[0].size),
            "seconds": round(elapsed, 2),
            "targets": {"recall": RECALL_TARGET, "wrong_merge_share": WRONG_MERGE_TARGET},
            "views": [{**asdict(r), "passed": r.passed} for r in results],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
    return 0 if all(r.passed for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
