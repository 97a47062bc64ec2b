"""Clusters across crawls: one near-duplicate clustering of the pages of every crawl in a store.

Each crawl of a store is clustered on its own when it is scanned. Questions that span crawls
(is this week's page a copy of one seen last month on another host? which clusters persist?)
need one clustering of all of them together. The crawls' stored signatures are compared as
they are: the same LSH bands tuned recall first, the same verification against the threshold,
and the same core rule as a scan. Nothing is re-read or re-sketched.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.crawls.evolution import StoreError, list_crawls
from neardup.kernels import band_keys, estimate_resemblance
from neardup.kernels.buckets import bucket_candidates, unpack_pairs
from neardup.kernels.graph import Graph, core_clusters
from neardup.kernels.tuning import recall_first_bands
from neardup.store import load_settings

OUTPUT = "cross_clusters.parquet"
CHUNK = 200_000


def _crawl_pages(run: Path) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(doc ids, urls, signatures) of the compared pages of one crawl, in doc order."""
    pages = pq.read_table(run / "pages.parquet", columns=["doc_id", "url", "cluster_id"])
    compared = pages.filter(pages.column("cluster_id").is_valid())
    docs = compared.column("doc_id").to_numpy()
    signature_docs = np.load(run / "signature_docs.npy")
    signatures = np.load(run / "signatures.npy", mmap_mode="r")
    rows = np.searchsorted(signature_docs, docs)
    return docs, compared.column("url").to_pylist(), np.asarray(signatures[rows])


def cross_crawl_clusters(store: str | Path) -> pa.Table:
    """Cluster the pages of all crawls together; write and return `cross_clusters.parquet`
    (crawl, doc_id, url, cross_cluster_id, representative_crawl, representative_url).
    `cross_cluster_id` is the position of the representative in crawl order, then doc order."""
    store = Path(store)
    crawls = list_crawls(store)
    if not crawls:
        raise StoreError(f"{store} has no crawls; add one with `neardup crawl`")
    settings = load_settings(store / crawls[0]["path"])
    labels: list[str] = []
    docs: list[np.ndarray] = []
    urls: list[str] = []
    signatures: list[np.ndarray] = []
    for entry in crawls:
        crawl_docs, crawl_urls, crawl_sigs = _crawl_pages(store / entry["path"])
        labels += [entry["label"]] * crawl_docs.size
        docs.append(crawl_docs)
        urls += crawl_urls
        signatures.append(crawl_sigs)
    sig = np.concatenate(signatures)
    n = sig.shape[0]
    bands, rows = recall_first_bands(settings.threshold, settings.num_perm, settings.band_recall)
    keys = (
        np.concatenate([band_keys(sig[i : i + CHUNK], bands, rows) for i in range(0, n, CHUNK)])
        if n
        else np.empty((0, bands), dtype=np.int64)
    )
    packed, _ = bucket_candidates(keys, np.arange(n), settings.max_bucket_pairs)
    a, b = unpack_pairs(packed)
    sim = np.empty(a.size, dtype=np.float64)
    for i in range(0, a.size, CHUNK):
        sim[i : i + CHUNK] = estimate_resemblance(sig[a[i : i + CHUNK]], sig[b[i : i + CHUNK]])
    keep = sim >= settings.threshold
    graph = Graph.from_edges(n, a[keep], b[keep], sim[keep])
    rep = core_clusters(graph, settings.strong_similarity)
    label_array = pa.array(labels, pa.string())
    url_array = pa.array(urls, pa.string())
    table = pa.table(
        {
            "crawl": label_array,
            "doc_id": pa.array(np.concatenate(docs) if docs else np.empty(0, np.int64)),
            "url": url_array,
            "cross_cluster_id": pa.array(rep, pa.int64()),
            "representative_crawl": label_array.take(pa.array(rep)),
            "representative_url": url_array.take(pa.array(rep)),
        }
    )
    tmp = store / f".{OUTPUT}.tmp"
    pq.write_table(table, tmp, compression="zstd")
    os.replace(tmp, store / OUTPUT)
    return table
