"""Opening an index reads its rows a chunk at a time: the graph must be the one it had."""

from __future__ import annotations

import numpy as np

import neardup.service.index as index_module
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


def test_reopened_in_small_chunks_the_graph_is_the_same(tmp_path, monkeypatch):
    texts = _texts(120, 3)
    with ServiceIndex(tmp_path / "s") as ix:
        ix.apply([PageUpdate(f"http://x/{i}", text=t) for i, t in enumerate(texts)])
        ix.apply([PageUpdate(f"http://x/{i}", remove=True) for i in range(0, 120, 9)])
        adj = {u: dict(v) for u, v in ix.scan_graph.adj.items() if v}
        emitted = dict(ix.scan_graph.emitted)
        groups = {frozenset(m) for m in ix.groups.values() if m}
    monkeypatch.setattr(index_module, "LOAD_CHUNK", 7)
    with ServiceIndex(tmp_path / "s") as ix:
        assert {u: dict(v) for u, v in ix.scan_graph.adj.items() if v} == adj
        assert dict(ix.scan_graph.emitted) == emitted
        assert {frozenset(m) for m in ix.groups.values() if m} == groups
        assert len(adj) > 10 and ix.consistency_errors() == []
