"""The per-crawl LSH band index, and the signature helpers that compare crawls.

Lost and found (Broder et al. 1997, §4) and on-the-fly resemblance look a signature up in a
per-crawl LSH band index: for each band the sorted band keys and their signature rows,
memory-mapped, so one query is `bands` binary searches plus one comparison per candidate.
`neardup crawl` builds it (`store.add_crawl`), so it sits below the store; the helpers that
read a crawl's signatures and count agreeing min-hash values live here too, since cluster
evolution (page change) and lost and found both use them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neardup.kernels import EMPTY_VALUE, band_keys
from neardup.kernels.lsh import BandTable, recall_first_bands
from neardup.store import load_settings

INDEX_KEYS = "band_keys.npy"
INDEX_ROWS = "band_rows.npy"
INDEX_META = "band_index.json"
# The index catches pages down to this resemblance (recall first, 0.95 at exactly 0.5), so a
# document filling half of a larger page is still a candidate for the containment check.
INDEX_THRESHOLD = 0.5
MAX_BUCKET = 2000  # rows read per band and query: a boilerplate bucket cannot blow a query up


def row_lookup(docs: np.ndarray) -> np.ndarray:
    """doc_id -> signature row (-1 where the document has no signature)."""
    size = int(docs.max()) + 1 if docs.size else 0
    rows = np.full(size, -1, dtype=np.int64)
    rows[docs] = np.arange(docs.size)
    return rows


def signature_agreement(
    sig_a: np.ndarray, rows_a: np.ndarray, sig_b: np.ndarray, rows_b: np.ndarray, chunk: int = 65536
) -> np.ndarray:
    """Equal min-hash positions of row pairs of two (memory-mapped) signature matrices, read a
    chunk at a time so a million pairs never load both matrices whole."""
    out = np.empty(rows_a.size, dtype=np.int64)
    for start in range(0, rows_a.size, chunk):
        a = sig_a[rows_a[start : start + chunk]]
        b = sig_b[rows_b[start : start + chunk]]
        out[start : start + chunk] = np.count_nonzero(a == b, axis=1)
    return out


def crawl_signatures(run: Path) -> tuple[np.ndarray, np.ndarray]:
    """(doc_id of each row, signature matrix) of a crawl, the matrix memory-mapped so that
    comparing two crawls never loads either whole."""
    sig = np.load(run / "signatures.npy", mmap_mode="r")
    return np.load(run / "signature_docs.npy"), sig


def build_band_index(
    run: str | Path, threshold: float | None = None, chunk: int = 262144
) -> dict[str, Any]:
    """Write the crawl's band index: per band, the sorted keys and their signature rows.

    Bands are tuned recall first (the scan's own rule) for `threshold`, by default the lower
    of the crawl's threshold and INDEX_THRESHOLD, so queries can find contained pages. Pages
    without shingles are left out: their empty signatures would all share every band.
    """
    run = Path(run)
    settings = load_settings(run)
    if threshold is None:
        threshold = min(settings.threshold, INDEX_THRESHOLD)
    bands, rows = recall_first_bands(threshold, settings.num_perm, settings.band_recall)
    sig = np.load(run / "signatures.npy", mmap_mode="r")
    parts_k, parts_r = [], []
    for start in range(0, sig.shape[0], chunk):
        block = np.asarray(sig[start : start + chunk])
        keep = np.flatnonzero(~(block == EMPTY_VALUE).all(axis=1))
        parts_k.append(band_keys(block[keep], bands, rows).T)
        parts_r.append((keep + start).astype(np.int32))
    keys = np.concatenate(parts_k, axis=1) if parts_k else np.empty((bands, 0), np.int64)
    row_ids = np.concatenate(parts_r) if parts_r else np.empty(0, np.int32)
    table = BandTable.build(keys, row_ids)
    np.save(run / INDEX_KEYS, table.keys)
    np.save(run / INDEX_ROWS, table.ids)
    meta = {"bands": bands, "rows": rows, "threshold": threshold, "pages": int(row_ids.size)}
    (run / INDEX_META).write_text(json.dumps(meta) + "\n", encoding="utf-8")
    return meta


@dataclass
class BandIndex:
    """A crawl's memory-mapped band index (a `kernels.lsh.BandTable` over the saved arrays)
    and signatures."""

    keys: np.ndarray  # bands x N int64, each band sorted
    rows: np.ndarray  # bands x N int32 signature rows
    bands: int
    rows_per_band: int
    signatures: np.ndarray  # N_docs x K
    docs: np.ndarray  # doc_id of each signature row

    @classmethod
    def open(cls, run: str | Path) -> BandIndex:
        """Open the index, building it first when the crawl has none."""
        run = Path(run)
        if not (run / INDEX_META).exists():
            build_band_index(run)
        meta = json.loads((run / INDEX_META).read_text(encoding="utf-8"))
        docs, sig = crawl_signatures(run)
        return cls(
            keys=np.load(run / INDEX_KEYS, mmap_mode="r"),
            rows=np.load(run / INDEX_ROWS, mmap_mode="r"),
            bands=meta["bands"],
            rows_per_band=meta["rows"],
            signatures=sig,
            docs=docs,
        )

    def lookup(
        self, queries: np.ndarray, min_resemblance: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query index, doc_id, estimated resemblance) of every page sharing a band with a
        query signature (Q x K) and estimated at least `min_resemblance`.

        Vectorised over queries: per band one `searchsorted` of all query keys, then the
        matching ranges are expanded with `np.repeat` (`BandTable.lookup`); no Python loop
        over pages."""
        queries = np.atleast_2d(queries)
        qkeys = band_keys(queries, self.bands, self.rows_per_band)
        qi, row = BandTable(self.keys, self.rows).lookup(qkeys, MAX_BUCKET)
        if not qi.size:
            empty = np.empty(0, np.int64)
            return empty, empty, np.empty(0, np.float64)
        est = signature_agreement(queries, qi, self.signatures, row) / queries.shape[1]
        keep = est >= min_resemblance
        return qi[keep], self.docs[row[keep]].astype(np.int64), est[keep]
