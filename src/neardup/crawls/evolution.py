"""Cluster evolution and page change between the crawls of a store.

- Cluster evolution follows Fetterly, Manasse & Najork (2003): for URL u in crawls m and n,
  Φ = |C_m(u) ∩ C_n(u)| / |C_n(u)| and Ψ = |C_m(u) ∩ C_n(u)| / |C_m(u) ∪ C_n(u)|, averaged by
  the size of u's cluster in crawl m (SQL in `crawls/sql/`). Like the paper, every later
  crawl is compared with the first (cumulative) and with the one before it (consecutive).
- Page change counts agreeing min-hash values between the two fetches of a URL (K + 1 when the
  payloads are identical) and buckets them like the paper's 0 / 1-28 / 29-56 / 57-83 / 84 / 85
  for K = 84, scaled to any K.

Both read a crawl's tables where they lie, as single Parquet files (the embedded engine's)
or as Parquet datasets (the Spark engine's folders of part files): DuckDB reads either, and
the signatures come through `signatures.RunSignatures`, a chunk of pairs at a time.

The store itself is `store.py`; the signature helpers shared with lost and found are in
`signatures.py`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.crawls.signatures import RunSignatures, pair_agreement
from neardup.crawls.store import StoreError, list_crawls
from neardup.store import load_settings, sql_path
from neardup.store.sql_files import package_sql

# Fetterly et al.'s page-change buckets, from the most change to none (`change_order` 0..5).
CHANGES = ("complete", "large", "medium", "small", "no text change", "no change")


def _sql(name: str) -> str:
    return package_sql("crawls/sql", name)


def _connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(_sql("macros.sql"))
    return con


def phi_psi(
    urls_m: np.ndarray | list[str],
    clusters_m: np.ndarray | list[int],
    urls_n: np.ndarray | list[str],
    clusters_n: np.ndarray | list[int],
) -> pa.Table:
    """Φ and Ψ for every URL in both clusterings (one label per URL; a URL alone in its
    cluster is a singleton). Columns: url, size_m, size_n, common, phi, psi, bucket_lo,
    bucket; rows sorted by url. The same SQL as `evolution`, on plain arrays."""
    m = pa.table(
        {"url": pa.array(urls_m, pa.string()), "cluster": pa.array(clusters_m, pa.int64())}
    )
    n = pa.table(
        {"url": pa.array(urls_n, pa.string()), "cluster": pa.array(clusters_n, pa.int64())}
    )
    con = _connect()
    try:
        con.register("m", m)
        con.register("n", n)
        return con.sql(_sql("phi_psi.sql")).to_arrow_table()
    finally:
        con.close()


def change_buckets(agree: np.ndarray, k: int) -> list[str]:
    """Fetterly's change bucket of each agreement count (0..K, K + 1 for identical payloads)."""
    con = _connect()
    try:
        table = pa.table({"agree": pa.array(np.asarray(agree), pa.int64())})
        con.register("t", table)
        return [
            r[0] for r in con.execute(f"SELECT change_bucket(agree, {int(k)}) FROM t").fetchall()
        ]
    finally:
        con.close()


@dataclass
class Evolution:
    """Per-URL and summary tables of `evolution` (all pyarrow).

    Every table starts with crawl_m, crawl_n (the earlier and the later crawl compared) and
    the flags `consecutive` (n directly follows m) and `cumulative` (m is the first crawl);
    the first two crawls are both, so each pair of crawls is compared, and counted, once.
    """

    phi_psi: pa.Table
    changes: pa.Table
    phi_psi_summary: pa.Table
    change_summary: pa.Table
    hosts: pa.Table


@dataclass(frozen=True)
class Comparison:
    """Two crawls compared by `evolution`, by their positions in the store."""

    m: int
    n: int
    consecutive: bool
    cumulative: bool


def comparisons(crawls: int) -> list[Comparison]:
    """The pairs of crawls Fetterly et al. compare: each later crawl n against the first
    (cumulative: how far clusters drift from where they started, figures 4, 5 and 7) and
    against crawl n - 1 (consecutive: week-over-week change, figures 8-10). Ordered by n, then
    m; the pair (first, second) is listed once, as both."""
    out = []
    for n in range(1, crawls):
        if n > 1:
            out.append(Comparison(0, n, consecutive=False, cumulative=True))
        out.append(Comparison(n - 1, n, consecutive=True, cumulative=n == 1))
    return out


def _crawl_views(con: duckdb.DuckDBPyConnection, name: str, run: Path) -> None:
    query = _sql("crawl_pages.sql").format(path=sql_path(run / "pages.parquet"))
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {query}")


def _compare(
    con: duckdb.DuckDBPyConnection, run_m: Path, run_n: Path, labels: dict[str, Any]
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(Φ/Ψ per URL, hosts, page change per URL) of crawl m against crawl n."""
    k = load_settings(run_m).num_perm
    _crawl_views(con, "m", run_m)
    _crawl_views(con, "n", run_n)
    phi = _prepend(con.sql(_sql("phi_psi.sql")).to_arrow_table(), labels)
    hosts = _prepend(con.sql(_sql("hosts.sql")).to_arrow_table(), labels)
    pairs = con.sql(_sql("change_pairs.sql")).to_arrow_table()
    agree = pair_agreement(
        RunSignatures(run_m),
        pairs["doc_m"].to_numpy(),
        RunSignatures(run_n),
        pairs["doc_n"].to_numpy(),
    )
    agree = np.where(pairs["same_payload"].to_numpy(zero_copy_only=False), k + 1, agree)
    table = pairs.append_column("agree", pa.array(agree, pa.int64())).append_column(
        "k", pa.array(np.full(agree.size, k), pa.int64())
    )
    return phi, hosts, _prepend(table, labels)


def evolution(store: str | Path, write: bool = True) -> Evolution:
    """Φ/Ψ, host stability and page change of every later crawl of a store against the first
    crawl (cumulative) and against the crawl before it (consecutive); with `write`, the
    per-URL tables go to `evolution_phi_psi.parquet` and `evolution_changes.parquet` in the
    store (the `neardup report` of a store calls it without writing)."""
    store = Path(store)
    crawls = list_crawls(store)
    if len(crawls) < 2:
        raise StoreError(f"{store} holds {len(crawls)} crawl(s); evolution needs two or more")
    con = _connect()
    phis, changes, hosts = [], [], []
    try:
        for c in comparisons(len(crawls)):
            old, new = crawls[c.m], crawls[c.n]
            labels = {
                "crawl_m": old["label"],
                "crawl_n": new["label"],
                "consecutive": c.consecutive,
                "cumulative": c.cumulative,
            }
            phi, host, change = _compare(con, store / old["path"], store / new["path"], labels)
            phis.append(phi)
            hosts.append(host)
            changes.append(change)
        con.register("comparison_order", _comparison_order(crawls))
        con.register("phi_psi", pa.concat_tables(phis))
        con.register("changes_raw", pa.concat_tables(changes))
        all_changes = con.sql(
            "SELECT *, change_bucket(agree, k) AS change, change_order(agree, k) AS change_order"
            " FROM changes_raw"
        ).to_arrow_table()
        con.register("changes", all_changes)
        result = Evolution(
            phi_psi=pa.concat_tables(phis),
            changes=all_changes,
            phi_psi_summary=con.sql(_sql("phi_psi_summary.sql")).to_arrow_table(),
            change_summary=con.sql(_sql("change_summary.sql")).to_arrow_table(),
            hosts=pa.concat_tables(hosts),
        )
    finally:
        con.close()
    if write:
        pq.write_table(result.phi_psi, store / "evolution_phi_psi.parquet", compression="zstd")
        pq.write_table(result.changes, store / "evolution_changes.parquet", compression="zstd")
    return result


def _comparison_order(crawls: list[dict[str, Any]]) -> pa.Table:
    """(crawl_m, crawl_n, pair): the summaries follow crawl order, not label order, since
    labels such as `old` and `new` do not sort by time."""
    pairs = comparisons(len(crawls))
    return pa.table(
        {
            "crawl_m": [crawls[c.m]["label"] for c in pairs],
            "crawl_n": [crawls[c.n]["label"] for c in pairs],
            "pair": pa.array(range(len(pairs)), pa.int64()),
        }
    )


def _prepend(table: pa.Table, labels: dict[str, Any]) -> pa.Table:
    """The comparison's labels as leading constant columns (string or bool)."""
    for i, (name, value) in enumerate(labels.items()):
        kind = pa.bool_() if isinstance(value, bool) else pa.string()
        table = table.add_column(i, name, pa.array([value] * table.num_rows, kind))
    return table
