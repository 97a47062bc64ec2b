"""Replicated collections: similar clusters of hyperlinked page sets (Cho et al. 2000).

A replicated collection is a hyperlinked set of pages (a manual, a site section) copied on
several sites. The near-duplicate clusters of a scan are the *trivial clusters* (collections of
one page). Two trivial clusters Ri, Rj are merged when the links between them say that every
copy of Ri points to its own copy of Rj:

* similar clusters:  |Ri| = s = d = |Rj|
* extended clusters: |Ri| = s >= d = |Rj|   (the default: Rj is missing on a partial mirror)

where s is the number of pages of Ri linking into Rj and d the number of pages of Rj linked
from Ri (`linkgraph/sql/link_summary.sql`). The connected components of that trivial cluster
graph are the similar clusters of collections. Each page is then placed in a copy by the
paper's growth rule, "add each page to the collection of the page that points to it"
(`page_edges.sql`), and the copies are the components of that page graph.

Why whole components and not a search for the best clustering: the paper's argument, a search
over all clusterings is intractable, and growing favours larger cardinalities, which is what a
crawler avoid-list and a roll-up of search results need.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.kernels.sorting import sorted_distinct
from neardup.linkgraph.relational import (
    Connection,
    components,
    connect,
    query,
    query_sql,
    register_table,
    run_sql,
)

COLLECTIONS_FILE = "collections.parquet"
CLUSTERS_FILE = "collection_clusters.parquet"
COPIES_FILE = "collection_copies.parquet"
MAX_FOLD_ROUNDS = 20  # each round folds every cluster that qualifies; chains are short


@dataclass(frozen=True)
class CollectionOptions:
    """How trivial clusters are grown into collections.

    extended:    also merge when |Ri| = s >= d = |Rj| (partial mirrors), as the paper's
                 crawler experiment did; False keeps only |Ri| = s = d = |Rj|.
    single_site: a copy never crosses a host, and only links within a host count, except a
                 link to a page the source's host does not hold (a partial mirror's link to
                 the primary); the paper's crawler experiment ran this way.
    min_size:    clusters whose largest copy has fewer pages are noise (the paper: 10).
    """

    extended: bool = True
    single_site: bool = False
    min_size: int = 10

    def __post_init__(self) -> None:
        if self.min_size < 1:
            raise ValueError(f"min_size must be at least 1, not {self.min_size}")


@dataclass
class Collections:
    """What `find_collections` found: three tables and a few counts.

    clusters: collection_cluster_id, description, cardinality, size, pages, principal_url,
              principal_host, sites (one row per similar cluster of collections)
    copies:   collection_cluster_id, collection_id, host, n_hosts, pages,
              links_from_other_sites, is_principal, root_url, prefix
    pages:    collection_cluster_id, collection_id, doc_id, url, host, is_root
    """

    clusters: pa.Table
    copies: pa.Table
    pages: pa.Table
    options: CollectionOptions
    trivial_clusters: int = 0
    merge_edges: int = 0
    similar_edges: int = 0
    seconds: float = 0.0
    stats: dict[str, int] = field(default_factory=dict)

    def write(self, out_dir: str | Path) -> list[Path]:
        """Write collections.parquet (pages), collection_clusters and collection_copies."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        clusters = self.clusters.set_column(
            self.clusters.schema.get_field_index("sites"),
            "sites",
            self.clusters.column("sites").cast(pa.list_(pa.string())),
        )
        written = []
        for name, table in (
            (COLLECTIONS_FILE, self.pages),
            (CLUSTERS_FILE, clusters),
            (COPIES_FILE, self.copies),
        ):
            pq.write_table(table, out / name)
            written.append(out / name)
        return written


def copy_prefix(min_url: str | None, max_url: str | None) -> str | None:
    """The URL directory that holds a copy: the common prefix of its URLs, cut at a '/'.

    The longest common prefix of a set of strings is that of its smallest and largest member,
    so SQL's min/max are enough. The prefix always keeps `scheme://host/`.
    """
    if not min_url or not max_url:
        return None
    same = [x == y for x, y in zip(min_url, max_url, strict=False)]
    common = min_url[: same.index(False) if False in same else len(same)]
    scheme_end = common.find("://")
    host_end = common.find("/", scheme_end + 3) if scheme_end >= 0 else -1
    if host_end < 0:
        # the two URLs differ inside the host name: fall back to the smaller URL's host root
        scheme_end = min_url.find("://")
        host_end = min_url.find("/", scheme_end + 3)
        return min_url if host_end < 0 else min_url[: host_end + 1]
    return common[: common.rfind("/") + 1]


def find_collections(con: Connection, options: CollectionOptions | None = None) -> Collections:
    """Similar clusters of collections from the `pages` and `links` tables of `con`.

    `con` is a run's connection (`neardup.open_run`), any DuckDB connection with tables
    `pages(doc_id, url, host, title, cluster_id, skipped_reason)` and
    `links(src_doc, dst_url, dst_doc)`, or a `SparkSQLConnection` with those views. Only
    temporary tables are created. The SQL steps run on the connection's engine; the
    components and the fold loop's relabelling run here, on the driver
    (docs/spark_relational.md).
    """
    options = options or CollectionOptions()
    started = time.perf_counter()
    params = {"single_site": options.single_site, "extended": options.extended}
    for name in ("trivial.sql", "link.sql", "link_summary.sql", "merge_edges.sql"):
        run_sql(con, name, **params)
    run_sql(con, "page_edges.sql", **params)

    rids = query(con, "SELECT DISTINCT rid FROM trivial ORDER BY rid")["rid"]
    merged = query(con, "SELECT ri, rj, is_similar FROM merge_edges")
    comp_of_rid = components(rids, merged["ri"], merged["rj"])

    members = query(con, "SELECT pid, rid FROM trivial ORDER BY pid")
    edges = query(con, "SELECT parent, child FROM page_edges")
    copy = components(members["pid"], edges["parent"], edges["child"])
    comp = comp_of_rid[np.searchsorted(rids, members["rid"])]
    assign = {"pid": members["pid"], "rid": members["rid"], "comp": comp, "copy": copy}
    register_table(con, "copy_assign", assign)

    # Lone pages join their host's copy; then, across break points, whole clusters fold into
    # the cluster whose copies link to theirs; lone pages once more.
    steps = ["stray_edges.sql"] + ["fold_edges.sql"] * MAX_FOLD_ROUNDS + ["stray_edges.sql"]
    for i, step in enumerate(steps):
        run_sql(con, step, min_size=options.min_size, extended=options.extended)
        joins = query(con, f"SELECT copy_x, copy_y FROM {step.removesuffix('.sql')}")
        if not joins["copy_x"].size:
            if step == "fold_edges.sql":  # nothing left to fold: go to the last step
                steps[i + 1 : -1] = []
            continue
        copy_ids = sorted_distinct(assign["copy"])
        new_copy = components(copy_ids, joins["copy_x"], joins["copy_y"])
        assign["copy"] = new_copy[np.searchsorted(copy_ids, assign["copy"])]
        assign["comp"] = _relabel_comps(assign["comp"], assign["copy"])
        register_table(con, "copy_assign", assign)
    run_sql(con, "copy_stats.sql")

    clusters = query_sql(con, "out_clusters.sql", min_size=options.min_size)
    register_table(
        con, "kept_clusters", {"collection_cluster_id": clusters["collection_cluster_id"]}
    )
    copies = query_sql(con, "out_copies.sql", min_size=options.min_size)
    prefixes = [
        copy_prefix(lo, hi)
        for lo, hi in zip(
            copies.column("min_url").to_pylist(), copies.column("max_url").to_pylist(), strict=True
        )
    ]
    copies = copies.drop_columns(["min_url", "max_url"]).append_column(
        "prefix", pa.array(prefixes, pa.string())
    )
    pages = query_sql(con, "out_pages.sql", min_size=options.min_size)
    similar = merged["is_similar"]
    return Collections(
        clusters=clusters,
        copies=copies,
        pages=pages,
        options=options,
        trivial_clusters=int(rids.size),
        merge_edges=int(similar.size),
        similar_edges=int(similar.sum()) if similar.size else 0,
        seconds=time.perf_counter() - started,
    )


def _relabel_comps(comp: np.ndarray, copy: np.ndarray) -> np.ndarray:
    """Components after folding: clusters that now share a copy are one cluster."""
    ids = sorted_distinct(comp)
    # link every page's old cluster to the old cluster of the first page of its copy
    order = np.argsort(copy, kind="stable")
    sorted_copy = copy[order]
    starts = np.flatnonzero(np.r_[True, sorted_copy[1:] != sorted_copy[:-1]])
    lead = np.repeat(comp[order][starts], np.diff(np.r_[starts, sorted_copy.size]))
    merged = components(ids, lead, comp[order])
    return merged[np.searchsorted(ids, comp)]


def collections_from_run(
    run: str | Path,
    options: CollectionOptions | None = None,
    engine: str = "embedded",
    spark_master: str | None = None,
) -> Collections:
    """`find_collections` on a finished run directory.

    engine: `embedded` (DuckDB on the run's database) or `spark` (Spark SQL on the run's
    Parquet exports; `spark_master` as for `neardup scan`). Same tables either way: the
    engine only decides where the SQL runs, so it is a connection, not a second code path.
    """
    con = connect(run, engine, spark_master)
    try:
        return find_collections(con, options)
    finally:
        con.close()
