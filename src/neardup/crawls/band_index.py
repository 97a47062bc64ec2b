"""The per-crawl LSH band index.

Lost and found (Broder et al. 1997, §4) and on-the-fly resemblance look a signature up in a
per-crawl LSH band index: for each band the sorted band keys and their signature rows,
memory-mapped, so one query is `bands` binary searches plus one comparison per candidate.
`neardup crawl` builds it (`store.add_crawl`), so it sits below the store. It is built by
streaming the crawl's signatures in batches (`signatures.RunSignatures`, either layout: an
embedded run's `signatures.npy` or a Spark run's `sketches.parquet/` dataset), so only the
index itself, a few bytes per band and page, is ever held on this machine.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from neardup.crawls.signatures import CHUNK, RunSignatures, signature_agreement
from neardup.kernels import EMPTY_VALUE, band_keys
from neardup.kernels.lsh import BandTable, recall_first_bands
from neardup.kernels.sorting import sorted_distinct
from neardup.store import load_settings

INDEX_KEYS = "band_keys.npy"
INDEX_ROWS = "band_rows.npy"
INDEX_META = "band_index.json"
INDEX_DOCS = "band_docs.npy"  # doc_id of each signature row, in either layout
# The index catches pages down to this resemblance (recall first, 0.95 at exactly 0.5), so a
# document filling half of a larger page is still a candidate for the containment check.
INDEX_THRESHOLD = 0.5
MAX_BUCKET = 2000  # rows read per band and query: a boilerplate bucket cannot blow a query up


def build_band_index(
    run: str | Path, threshold: float | None = None, chunk: int = 262144
) -> dict[str, Any]:
    """Write the crawl's band index: per band, the sorted keys and their signature rows, and
    the doc id of every row (`band_docs.npy`).

    Bands are tuned recall first (the scan's own rule) for `threshold`, by default the lower
    of the crawl's threshold and INDEX_THRESHOLD, so queries can find contained pages. Pages
    without shingles are left out: their empty signatures would all share every band. The
    signatures are read `chunk` rows at a time, in either layout.
    """
    run = Path(run)
    settings = load_settings(run)
    if threshold is None:
        threshold = min(settings.threshold, INDEX_THRESHOLD)
    bands, rows = recall_first_bands(threshold, settings.num_perm, settings.band_recall)
    parts_k, parts_r, parts_d = [], [], []
    start = 0
    for docs, block in RunSignatures(run).batches(chunk):
        keep = np.flatnonzero(~(block == EMPTY_VALUE).all(axis=1))
        parts_k.append(band_keys(block[keep], bands, rows).T)
        parts_r.append((keep + start).astype(np.int32))
        parts_d.append(docs)
        start += docs.size
    keys = np.concatenate(parts_k, axis=1) if parts_k else np.empty((bands, 0), np.int64)
    row_ids = np.concatenate(parts_r) if parts_r else np.empty(0, np.int32)
    table = BandTable.build(keys, row_ids)
    np.save(run / INDEX_KEYS, table.keys)
    np.save(run / INDEX_ROWS, table.ids)
    np.save(run / INDEX_DOCS, np.concatenate(parts_d) if parts_d else np.empty(0, np.int64))
    meta = {"bands": bands, "rows": rows, "threshold": threshold, "pages": int(row_ids.size)}
    (run / INDEX_META).write_text(json.dumps(meta) + "\n", encoding="utf-8")
    return meta


@dataclass
class BandIndex:
    """A crawl's memory-mapped band index (a `kernels.lsh.BandTable` over the saved arrays)
    and the crawl's signatures, read in place."""

    keys: np.ndarray  # bands x N int64, each band sorted
    rows: np.ndarray  # bands x N int32 signature rows
    bands: int
    rows_per_band: int
    signatures: RunSignatures
    docs: np.ndarray  # doc_id of each signature row

    @classmethod
    def open(cls, run: str | Path) -> BandIndex:
        """Open the index, building it first when the crawl has none."""
        run = Path(run)
        if not (run / INDEX_META).exists():
            build_band_index(run)
        meta = json.loads((run / INDEX_META).read_text(encoding="utf-8"))
        signatures = RunSignatures(run)
        # An index built before `band_docs.npy` was written: the rows of `signatures.npy`.
        docs_file = run / INDEX_DOCS
        docs = np.load(docs_file, mmap_mode="r") if docs_file.exists() else signatures.docs()
        return cls(
            keys=np.load(run / INDEX_KEYS, mmap_mode="r"),
            rows=np.load(run / INDEX_ROWS, mmap_mode="r"),
            bands=meta["bands"],
            rows_per_band=meta["rows"],
            signatures=signatures,
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
        est = self._agreement(queries, qi, row) / queries.shape[1]
        keep = est >= min_resemblance
        return qi[keep], np.asarray(self.docs[row[keep]]).astype(np.int64), est[keep]

    def _agreement(self, queries: np.ndarray, qi: np.ndarray, row: np.ndarray) -> np.ndarray:
        """Agreeing min-hash values of each candidate (query qi[i], signature row row[i]).
        The candidates' signatures are fetched `CHUNK` distinct rows at a time, in row order,
        so a crawl read from Parquet is read in narrow ranges and never held whole."""
        out = np.empty(qi.size, dtype=np.int64)
        order = np.argsort(row, kind="stable")
        by_row = row[order]
        distinct = sorted_distinct(by_row)
        for start in range(0, distinct.size, CHUNK):
            part = distinct[start : start + CHUNK]
            sig = self.signatures.of_docs(np.asarray(self.docs[part]))
            lo = np.searchsorted(by_row, part[0], side="left")
            hi = np.searchsorted(by_row, part[-1], side="right")
            sel = order[lo:hi]
            out[sel] = signature_agreement(queries, qi[sel], sig, np.searchsorted(part, row[sel]))
        return out
