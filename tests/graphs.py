"""Hand-made crawls for the collection, mirror and roll-up tests: pages and links as tables."""

from __future__ import annotations

from urllib.parse import urlsplit

import duckdb
import pyarrow as pa


def crawl(
    pages: list[tuple[str, int]],
    links: list[tuple[str, str]] = (),
    ips: dict[str, str] | None = None,
    titles: dict[str, str] | None = None,
) -> duckdb.DuckDBPyConnection:
    """An in-memory connection with `pages` and `links` shaped like a run's tables.

    pages: (url, cluster) in doc_id order; pages with the same cluster are near-duplicates
    (cluster_id is the smallest doc_id of the cluster, as in a scan). links: (src, dst) URLs.
    ips: host -> address; titles: url -> title.
    """
    ips, titles = ips or {}, titles or {}
    doc = {url: i for i, (url, _) in enumerate(pages)}
    first: dict[int, int] = {}
    for i, (_, c) in enumerate(pages):
        first.setdefault(c, i)
    hosts = [urlsplit(u).hostname for u, _ in pages]
    size = {c: sum(1 for _, k in pages if k == c) for c in first}
    table = pa.table(
        {
            "doc_id": pa.array(range(len(pages)), pa.int64()),
            "url": [u for u, _ in pages],
            "host": hosts,
            "title": [titles.get(u) for u, _ in pages],
            "ip": [ips.get(h) for h in hosts],
            "record_type": ["response"] * len(pages),
            "payload_bytes": pa.array([1000] * len(pages), pa.int64()),
            "cluster_id": pa.array([first[c] for _, c in pages], pa.int64()),
            "cluster_size": pa.array([size[c] for _, c in pages], pa.int64()),
            "skipped_reason": pa.array([None] * len(pages), pa.string()),
        }
    )
    link_table = pa.table(
        {
            "src_doc": pa.array([doc[s] for s, _ in links], pa.int64()),
            "dst_url": [d for _, d in links],
            "dst_doc": pa.array([doc.get(d) for _, d in links], pa.int64()),
        }
    )
    con = duckdb.connect()
    con.register("_p", table)
    con.register("_l", link_table)
    con.execute("CREATE TABLE pages AS SELECT * FROM _p")
    con.execute("CREATE TABLE links AS SELECT * FROM _l")
    return con


def site(host: str, tree: dict[str, list[str]], prefix: str = "/") -> tuple[list, list]:
    """Pages and links of one copy of a collection: tree maps a page name to its children.

    Page names double as cluster keys (the caller maps them to cluster numbers)."""
    names = list(dict.fromkeys([*tree, *(c for cs in tree.values() for c in cs)]))
    url = {n: f"https://{host}{prefix}{n}.html" for n in names}
    links = [(url[p], url[c]) for p, cs in tree.items() for c in cs]
    return [(url[n], n) for n in names], links
