"""`RunSignatures` reads the same signatures from both layouts of a run: an embedded run's
`signatures.npy`, and a `sketches.parquet/` dataset of several part files and row groups as
the Spark engine writes it (built here with pyarrow, so no Spark is needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from neardup.config import Settings
from neardup.crawls.signatures import RunSignatures, pair_agreement
from neardup.kernels import SIGNATURE_DTYPE
from neardup.store import RunError

K = 16


def _runs(tmp_path: Path) -> tuple[Path, Path, np.ndarray, np.ndarray]:
    """(matrix run, dataset run, doc ids, signatures): 1,000 sketched pages with gaps in
    the doc ids (skipped pages have no signature), in both layouts."""
    rng = np.random.default_rng(5)
    docs = np.sort(rng.choice(3000, 1000, replace=False)).astype(np.int64)
    sig = rng.integers(0, 2**32, (docs.size, K), dtype=np.uint64).astype(SIGNATURE_DTYPE)
    settings = Settings(num_perm=K).to_json()
    matrix, dataset = tmp_path / "embedded", tmp_path / "spark"
    for run in (matrix, dataset):
        run.mkdir()
        (run / "settings.json").write_text(settings)
    np.save(matrix / "signatures.npy", sig)
    np.save(matrix / "signature_docs.npy", docs)
    folder = dataset / "sketches.parquet"
    folder.mkdir()
    for part, rows in enumerate(np.array_split(np.arange(docs.size), 4)):
        values = pa.array(sig[rows].astype(np.int64).reshape(-1))
        table = pa.table(
            {
                "doc_id": pa.array(docs[rows]),
                "minhash": pa.ListArray.from_arrays(
                    pa.array(np.arange(0, rows.size * K + 1, K, dtype=np.int32)), values
                ),
            }
        )
        pq.write_table(table, folder / f"part-{part:05d}.parquet", row_group_size=60)
    (folder / "_SUCCESS").write_text("")  # Hadoop's bookkeeping is not a part file
    return matrix, dataset, docs, sig


def test_both_layouts_stream_and_fetch_the_same_rows(tmp_path: Path) -> None:
    matrix, dataset, docs, sig = _runs(tmp_path)
    for run in (matrix, dataset):
        signatures = RunSignatures(run)
        batches = list(signatures.batches(128))
        assert np.array_equal(np.concatenate([d for d, _ in batches]), docs)
        assert np.array_equal(np.concatenate([s for _, s in batches]), sig)
        assert np.array_equal(signatures.docs(), docs)
        picked = np.array([docs[999], docs[3], docs[3], docs[500]])
        got = signatures.of_docs(picked)
        assert got.dtype == SIGNATURE_DTYPE
        assert np.array_equal(got, sig[[999, 3, 3, 500]])
        assert signatures.of_docs(np.empty(0, np.int64)).shape == (0, K)
        missing = int(np.setdiff1d(np.arange(3000), docs)[0])
        with pytest.raises(RunError, match=f"document {missing} "):
            signatures.of_docs([missing])


def test_a_lookup_reads_only_the_row_groups_holding_its_documents(tmp_path: Path) -> None:
    _, dataset, docs, _ = _runs(tmp_path)
    first = pq.ParquetFile(dataset / "sketches.parquet" / "part-00000.parquet")
    assert first.metadata.num_row_groups == 5  # 250 rows, 60 a group
    holding = RunSignatures._groups_holding(first, np.array([docs[3], docs[130]]))
    assert holding == [0, 2]
    assert RunSignatures._groups_holding(first, np.array([docs[999]])) == []


def test_pair_agreement_across_layouts(tmp_path: Path) -> None:
    matrix, dataset, docs, sig = _runs(tmp_path)
    rng = np.random.default_rng(1)
    a, b = rng.integers(0, docs.size, 700), rng.integers(0, docs.size, 700)
    expected = np.count_nonzero(sig[a] == sig[b], axis=1)
    expected[:5] = K  # a page against itself agrees everywhere
    b[:5] = a[:5]
    for left, right in ((matrix, dataset), (dataset, matrix), (dataset, dataset)):
        got = pair_agreement(RunSignatures(left), docs[a], RunSignatures(right), docs[b], chunk=100)
        assert np.array_equal(got, expected)


def test_a_run_without_signatures_is_refused(tmp_path: Path) -> None:
    (tmp_path / "settings.json").write_text(Settings().to_json())
    with pytest.raises(RunError, match="no signatures"):
        RunSignatures(tmp_path)
