"""The peer benchmark's truth generator (bench/peers_data.py), without any peer installed.

Precision and recall of every tool are measured against this truth, so it must hold what its
docstring states: copies stay in their group, truth pairs are exactly the same-group pairs
at exact Jaccard >= 0.8, unrelated bases are not near-duplicates, and a seed fixes the output.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

peers_data = pytest.importorskip("peers_data")


@pytest.fixture(scope="module")
def pool() -> list[str]:
    from neardup.synth.corpus import stdlib_documents

    return [w for doc in stdlib_documents(limit=150) for w in doc.words]


def test_generate_is_deterministic_and_sized(pool: list[str]) -> None:
    a = peers_data.generate(pool, 400, seed=3)
    b = peers_data.generate(pool, 400, seed=3)
    assert len(a.texts) == 400
    assert a.texts == b.texts
    assert np.array_equal(a.group, b.group)
    assert set(a.edit) <= {"base", *peers_data.EDITS}
    # every group has exactly one base
    bases = np.asarray([e == "base" for e in a.edit])
    assert np.array_equal(np.bincount(a.group[bases]), np.ones(a.group.max() + 1, dtype=int))


def test_truth_pairs_are_same_group_pairs_above_threshold(pool: list[str]) -> None:
    corpus = peers_data.generate(pool, 300, seed=1)
    truth = peers_data.truth_pairs(corpus.texts, corpus.group)
    assert len(truth) > 0
    assert np.all(truth[:, 0] < truth[:, 1])
    assert np.all(corpus.group[truth[:, 0]] == corpus.group[truth[:, 1]])
    sets = [peers_data._shingle_set(t) for t in corpus.texts]
    found = {tuple(p) for p in truth.tolist()}
    for i in range(len(sets)):
        for j in range(i + 1, len(sets)):
            if corpus.group[i] != corpus.group[j]:
                continue
            sim = peers_data.exact_jaccard(sets[i], sets[j])
            assert ((i, j) in found) == (sim >= peers_data.THRESHOLD)
    exact = [k for k, e in enumerate(corpus.edit) if e == "exact"]
    assert exact, "the seed should produce at least one exact copy"
    assert all(any(k in p for p in found) for k in exact)


def test_bases_are_not_near_duplicates(pool: list[str]) -> None:
    corpus = peers_data.generate(pool, 300, seed=2)
    assert peers_data.check_cross_groups(corpus.texts, corpus.group, threshold=0.5) == 0
