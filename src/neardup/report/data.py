"""The figures behind the report, each computed by one aggregate query on the run.

Every function takes a read-only run connection and returns small Python values (histogram
rows, top-N lists): the aggregation happens in DuckDB, so a run of millions of pages never
comes into Python. The report and the web UI share these functions, so both show the same
numbers, and the tests recompute them independently.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow.parquet as pq

from neardup.kernels.lsh import candidate_probability

# Pages compared by the scan (skipped records have no fingerprints nor cluster).
COMPARED = "skipped_reason IS NULL"
SNIPPET_CHARS = 280


def copy_bucket_labels(max_copies: int) -> list[str]:
    """Bucket labels 0, 1, 2–10, 11–100, … up to the decade holding `max_copies`.

    Shivakumar and Garcia-Molina's replication histogram uses decades, since the number of
    copies is heavy-tailed: a few pages have thousands of copies, most have none.
    """
    labels = ["0", "1", "2–10"]
    upper = 10
    while upper < max_copies:
        labels.append(f"{upper + 1}–{upper * 10}")
        upper *= 10
    return labels


def _bucket_sql(column: str) -> str:
    """SQL for the bucket index of a copy count (0, 1, 2–10 → 2, 11–100 → 3, …)."""
    return (
        f"CASE WHEN {column} <= 1 THEN {column} "
        f"ELSE 1 + CAST(ceil(log10({column}) - 1e-9) AS INTEGER) END"
    )


def replication_histogram(con: duckdb.DuckDBPyConnection) -> list[dict[str, Any]]:
    """Share of compared pages with 0, 1, 2–10, … other copies: exact and near.

    Exact copies share `exact_fp` (the payload fingerprint); near copies share `cluster_id`.
    A page's copies are the other members of its group, so a group of n pages puts n pages
    in the bucket of n − 1.
    """
    rows = con.execute(
        f"""
        WITH compared AS (
            SELECT exact_fp, cluster_id, coalesce(cluster_size, 1) AS cluster_size
            FROM pages WHERE {COMPARED}
        ),
        counted AS (
            SELECT count(*) OVER (PARTITION BY exact_fp) - 1 AS exact_copies,
                   cluster_size - 1 AS near_copies
            FROM compared
        ),
        buckets AS (
            SELECT {_bucket_sql("exact_copies")} AS b, 'exact' AS kind FROM counted
            UNION ALL
            SELECT {_bucket_sql("near_copies")} AS b, 'near' AS kind FROM counted
        )
        SELECT b, kind, count(*) FROM buckets GROUP BY ALL ORDER BY b, kind
        """
    ).fetchall()
    total = con.execute(f"SELECT count(*) FROM pages WHERE {COMPARED}").fetchone()[0]
    n_buckets = max((b for b, _, _ in rows), default=2) + 1
    labels = copy_bucket_labels(10 ** max(1, n_buckets - 2))
    out = [{"bucket": labels[i], "exact_pages": 0, "near_pages": 0} for i in range(len(labels))]
    for b, kind, n in rows:
        out[b][f"{kind}_pages"] = n
    for row in out:
        row["exact_share"] = row["exact_pages"] / total if total else 0.0
        row["near_share"] = row["near_pages"] / total if total else 0.0
    return out


@dataclass
class SizeDistribution:
    """Number of clusters of each size (singletons included) and the power-law fit.

    slope: the least-squares slope of log10(count) against log10(size) over sizes >= 2;
    Fetterly et al. found such a line with slope near -2 on their crawl. None when fewer than
    two distinct sizes exist.
    """

    sizes: list[int]
    counts: list[int]
    slope: float | None
    intercept: float | None


def cluster_sizes(con: duckdb.DuckDBPyConnection) -> SizeDistribution:
    """Cluster size distribution from `pages` (a page outside any pair is a cluster of 1)."""
    rows = con.execute(
        f"""
        SELECT coalesce(cluster_size, 1) AS size,
               count(*) // coalesce(cluster_size, 1) AS clusters
        FROM pages WHERE {COMPARED}
        GROUP BY 1 ORDER BY 1
        """
    ).fetchall()
    sizes = [int(s) for s, _ in rows]
    counts = [int(c) for _, c in rows]
    fit = [(s, c) for s, c in zip(sizes, counts, strict=True) if s >= 2 and c > 0]
    slope = intercept = None
    if len(fit) >= 2:
        x = np.log10([s for s, _ in fit])
        y = np.log10([c for _, c in fit])
        slope, intercept = (float(v) for v in np.polyfit(x, y, 1))
    return SizeDistribution(sizes, counts, slope, intercept)


def largest_clusters(
    con: duckdb.DuckDBPyConnection, top: int = 20, urls_per_cluster: int = 5
) -> list[dict[str, Any]]:
    """The `top` largest clusters: size, hosts, representative, a few member URLs, a snippet.

    Member URLs and hosts are gathered with one windowed query over the top clusters only.
    """
    clusters = con.execute(
        "SELECT cluster_id, size, n_hosts, n_distinct_texts, min_similarity, "
        "representative_doc_id, representative_url, representative_title "
        "FROM clusters ORDER BY size DESC, cluster_id LIMIT ?",
        [top],
    ).fetchall()
    names = [
        "cluster_id",
        "size",
        "n_hosts",
        "n_distinct_texts",
        "min_similarity",
        "representative_doc_id",
        "representative_url",
        "representative_title",
    ]
    out = [dict(zip(names, row, strict=True)) for row in clusters]
    if not out:
        return out
    ids = [c["cluster_id"] for c in out]
    members = con.execute(
        """
        SELECT cluster_id, url, host FROM (
            SELECT cluster_id, url, host,
                   row_number() OVER (PARTITION BY cluster_id
                                      ORDER BY NOT is_representative, doc_id) AS k
            FROM pages WHERE cluster_id IN (SELECT unnest(?::BIGINT[]))
        ) WHERE k <= ? ORDER BY cluster_id, k
        """,
        [ids, urls_per_cluster],
    ).fetchall()
    hosts = con.execute(
        """
        SELECT cluster_id, list(DISTINCT host ORDER BY host) FROM pages
        WHERE cluster_id IN (SELECT unnest(?::BIGINT[])) GROUP BY cluster_id
        """,
        [ids],
    ).fetchall()
    snippets = con.execute(
        "SELECT doc_id, left(regexp_replace(text, '\\s+', ' ', 'g'), ?) FROM page_text "
        "WHERE doc_id IN (SELECT unnest(?::BIGINT[]))",
        [SNIPPET_CHARS, [c["representative_doc_id"] for c in out]],
    ).fetchall()
    urls: dict[int, list[str]] = {}
    for cid, url, _ in members:
        urls.setdefault(cid, []).append(url)
    host_lists = dict(hosts)
    snippet_of = dict(snippets)
    for c in out:
        c["urls"] = urls.get(c["cluster_id"], [])
        c["hosts"] = host_lists.get(c["cluster_id"], [])
        c["snippet"] = snippet_of.get(c["representative_doc_id"]) or ""
    return out


def similarity_histogram(
    con: duckdb.DuckDBPyConnection, bin_width: float = 0.01
) -> list[tuple[float, int]]:
    """(bin start, pairs) of the verified near-duplicate pairs' similarities.

    Only `kind = 'near'` pairs: the `identical` rows join a page to its class representative
    and are 1.0 by construction, which would hide the shape of the histogram.
    """
    n_bins = round(1 / bin_width)
    rows = con.execute(
        "SELECT least(CAST(floor(similarity * ?) AS INTEGER), ? - 1) AS b, count(*) "
        "FROM pairs WHERE kind = 'near' GROUP BY 1 ORDER BY 1",
        [n_bins, n_bins],
    ).fetchall()
    return [(b / n_bins, int(n)) for b, n in rows]


@dataclass
class Banding:
    """The LSH banding of the run (None for methods without bands) and its S-curve."""

    bands: int | None
    rows: int | None
    threshold: float
    method: str
    curve: list[tuple[float, float]] = field(default_factory=list)

    @property
    def at_threshold(self) -> float | None:
        if not self.bands or not self.rows:
            return None
        return candidate_probability(self.threshold, self.bands, self.rows)

    @property
    def half_point(self) -> float | None:
        """The resemblance caught half of the time, (1/b)^(1/r) approximately."""
        if not self.bands or not self.rows:
            return None
        return (1 / self.bands) ** (1 / self.rows)


def banding(summary: dict[str, Any], settings: dict[str, Any], points: int = 101) -> Banding:
    """The S-curve 1 − (1 − r^rows)^bands of the bands the scan used (summary.json)."""
    bands = summary.get("bands")
    rows = summary.get("rows_per_band")
    result = Banding(
        bands=bands,
        rows=rows,
        threshold=float(settings.get("threshold", 0.8)),
        method=str(summary.get("candidate_method") or settings.get("method", "")),
    )
    if bands and rows:
        result.curve = [
            (i / (points - 1), candidate_probability(i / (points - 1), bands, rows))
            for i in range(points)
        ]
    return result


@dataclass
class Savings:
    """What a crawl saves by skipping the non-representative near-duplicates.

    pages/bytes: compared pages that are not their cluster's representative, and their
    payload bytes; compared_*: all compared pages; avoid_*: the avoid-list savings (whole
    mirrors, aliases, collection replicas), None when no avoid-list was computed.
    """

    pages: int
    bytes: int
    compared_pages: int
    compared_bytes: int
    avoid_pages: int | None = None
    avoid_bytes: int | None = None
    crawl_pages: int | None = None
    crawl_bytes: int | None = None
    avoid_entries: list[dict[str, Any]] = field(default_factory=list)


def savings(con: duckdb.DuckDBPyConnection) -> Savings:
    """Pages and bytes of the duplicates a deduplicated crawl would not keep."""
    pages, nbytes, total, total_bytes = con.execute(
        f"""
        SELECT count(*) FILTER (WHERE NOT is_representative),
               coalesce(sum(payload_bytes) FILTER (WHERE NOT is_representative), 0),
               count(*), coalesce(sum(payload_bytes), 0)
        FROM pages WHERE {COMPARED}
        """
    ).fetchone()
    return Savings(int(pages), int(nbytes), int(total), int(total_bytes))


def add_avoid_savings(result: Savings, entries: list[dict[str, Any]], crawl: tuple[int, int]):
    """Attach the avoid-list's per-entry figures and totals to `result`."""
    result.avoid_entries = entries
    result.avoid_pages = sum(int(e["pages"]) for e in entries)
    result.avoid_bytes = sum(int(e["bytes"]) for e in entries)
    result.crawl_pages, result.crawl_bytes = crawl
    return result


def crawl_totals(con: duckdb.DuckDBPyConnection) -> tuple[int, int]:
    """Fetched records and their bytes, counted as the avoid-list counts them."""
    n, b = con.execute(
        "SELECT count(*), coalesce(sum(payload_bytes), 0) FROM pages "
        "WHERE coalesce(record_type, 'response') NOT IN ('request', 'warcinfo', 'metadata')"
    ).fetchone()
    return int(n), int(b)


def read_parquet_rows(path: Path, limit: int | None = None) -> list[dict[str, Any]] | None:
    """Rows of a small output table (mirrors, collection clusters), or None if absent."""
    if not path.exists():
        return None
    table = pq.read_table(path)
    if limit is not None:
        table = table.slice(0, limit)
    return table.to_pylist()


def human_bytes(n: float | None) -> str:
    """1234567 → '1.2 MB' (decimal units, as the avoid-list prints)."""
    if n is None:
        return "–"
    if n < 1000:
        return f"{int(n)} B"
    exp = min(int(math.log10(n) // 3), 4)
    return f"{n / 10 ** (3 * exp):,.1f} {['B', 'kB', 'MB', 'GB', 'TB'][exp]}"
