"""Opening an index builds its scan graph at once (`ScanGraph.load`, the scan's kernels over
arrays); it must be the graph the batches built page by page (`ScanGraph.update`)."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.config import Settings
from neardup.service import PageUpdate, ServiceIndex


def _texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    vocab = [f"w{i}" for i in range(600)]
    base = [" ".join(rng.choice(vocab, 120)) for _ in range(n // 4)]
    out = []
    for i in range(n):
        words = base[i % len(base)].split()
        for _ in range(int(rng.integers(0, 8))):
            words[int(rng.integers(0, len(words)))] = f"e{int(rng.integers(0, 10**6))}"
        out.append(" ".join(words))
    return out


def _graph(ix: ServiceIndex) -> tuple[object, ...]:
    """The graph keyed by URL: edges, candidate counts, classes, representatives, band keys."""
    adj, emitted, fp, classes, rep, keys = ix.scan_graph.view()
    return ({u: v for u, v in adj.items() if v}, emitted, fp, classes, rep, keys)


@pytest.mark.parametrize(("seed", "max_bucket_pairs"), [(3, 1000), (4, 3), (5, 2)])
def test_the_graph_opened_at_once_is_the_one_the_batches_built(tmp_path, seed, max_bucket_pairs):
    # Small buckets (max_bucket_pairs 2 or 3) make chains in key order; repeated texts make
    # classes of several pages; removals and rewrites leave pages out of the graph.
    settings = Settings(max_bucket_pairs=max_bucket_pairs)
    texts = _texts(160, seed)
    with ServiceIndex(tmp_path / "s", settings) as ix:
        ix.apply([PageUpdate(f"http://x/{i}", text=t) for i, t in enumerate(texts[:100])])
        ix.apply([PageUpdate(f"http://y/{i}", text=texts[i]) for i in range(0, 100, 7)])
        ix.apply([PageUpdate(f"http://x/{i}", remove=True) for i in range(0, 100, 9)])
        ix.apply([PageUpdate(f"http://x/{i}", text=texts[i + 60]) for i in range(0, 40, 5)])
        ix.apply([PageUpdate(f"http://z/{i}", text=t) for i, t in enumerate(texts[100:])])
        built = _graph(ix)
        groups = {frozenset(m) for m in ix.groups.values() if m}
    with ServiceIndex(tmp_path / "s", read_only=True) as ix:
        assert _graph(ix) == built
        assert {frozenset(m) for m in ix.groups.values() if m} == groups
        adj, emitted, _, classes, *_ = built
        assert len(adj) > 10 and len(emitted) > len(adj) // 2
        assert any(len(m) > 1 for m in classes.values())
        assert ix.consistency_errors() == []
        # and the opened graph takes the next batch as the built one would
    with ServiceIndex(tmp_path / "s") as ix:
        ix.apply([PageUpdate(f"http://w/{i}", text=t) for i, t in enumerate(texts[:30])])
        after = _graph(ix)
    with ServiceIndex(tmp_path / "s", read_only=True) as ix:
        assert _graph(ix) == after
