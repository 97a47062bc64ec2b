"""Clusters across crawls: one near-duplicate clustering of the pages of every crawl in a store.

Each crawl of a store is clustered on its own when it is scanned. Questions that span crawls
(is this week's page a copy of one seen last month on another host? which clusters persist?)
need one clustering of all of them together. The crawls' stored signatures are compared as
they are, through the scan's own near-duplicate functions (`pipeline.steps.near_pairs`): the
same LSH band shape (as set, or tuned recall first), the same bucket cap, the same
verification against the threshold, and the same core rule. Nothing is re-read or
re-sketched, whichever engine scanned a crawl (`signatures.RunSignatures` reads an embedded
run's matrix or a Spark run's sketches dataset in place). Only the min-hash signatures are
stored with a crawl, so pages are always bucketed by LSH bands and verified by estimated
resemblance, whatever the scan's method; and every page is compared, not one per equivalence
class, since the classes are per crawl.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.crawls.signatures import RunSignatures
from neardup.crawls.store import StoreError, list_crawls
from neardup.kernels.graph import Graph, core_clusters
from neardup.pipeline.steps.near_pairs import lsh_keys, lsh_shape, verified_candidates
from neardup.store import load_settings

OUTPUT = "cross_clusters.parquet"


def _crawl_pages(run: Path) -> tuple[np.ndarray, list[str], np.ndarray]:
    """(doc ids, urls, signatures) of the compared pages of one crawl, in doc order. The
    pages table is a file (embedded) or a folder of part files (Spark), read in place."""
    pages = pq.read_table(run / "pages.parquet", columns=["doc_id", "url", "cluster_id"])
    compared = pages.filter(pages.column("cluster_id").is_valid()).sort_by("doc_id")
    docs = compared.column("doc_id").to_numpy()
    return docs, compared.column("url").to_pylist(), RunSignatures(run).of_docs(docs)


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
    keys = lsh_keys(sig, None, *lsh_shape(settings))
    edges = verified_candidates(keys, np.arange(n), sig, settings)
    graph = Graph.from_edges(n, edges.a, edges.b, edges.similarity)
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
