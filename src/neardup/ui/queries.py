"""The web UI's queries: one bounded DuckDB query per view, never a whole table in Python.

Every list is paged with LIMIT/OFFSET and asks for one row more than it shows, which says
whether a next page exists without a `count(*)` over the store. A run's database is opened
read-only, so no index can be added to it; the queries lean on what DuckDB has anyway:
`pages` and `page_text` are stored in `doc_id` order, so a `doc_id` lookup is pruned by the
row-group min/max (zonemaps), and a filtered scan without ORDER BY keeps that order
(DuckDB preserves insertion order), so a URL search stops as soon as a page is full. Which
pages a text search finds comes from the run's word index (`search_index`, SQLite FTS5):
scanning every text took 12 to 33 s at a million pages.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from neardup.store import sql_path
from neardup.ui import search_index
from neardup.ui.search_index import Query

PAGE_SIZE = 25
SNIPPET = 240
_SPACE = re.compile(r"\s+")
PAGE_COLUMNS = (
    "p.doc_id, p.url, p.host, p.title, p.cluster_id, p.cluster_size, p.is_representative, "
    "p.similarity_to_representative AS similarity"
)


@dataclass
class Page:
    """One page of results: rows, where they start, and whether more follow."""

    rows: list[dict[str, Any]]
    offset: int
    limit: int
    has_more: bool
    extra: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rows": self.rows,
            "offset": self.offset,
            "limit": self.limit,
            "has_more": self.has_more,
            **self.extra,
        }


def fetch(cur: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> list[dict[str, Any]]:
    """Rows of a query as dicts (the queries here return a page of rows at most)."""
    result = cur.execute(sql, params)
    names = [d[0] for d in result.description]
    return [dict(zip(names, row, strict=True)) for row in result.fetchall()]


def paged(
    cur: duckdb.DuckDBPyConnection, sql: str, params: list[Any], limit: int, offset: int
) -> Page:
    """`sql` (no LIMIT of its own) cut to one page, fetching one extra row to see a next."""
    rows = fetch(cur, f"{sql} LIMIT ? OFFSET ?", [*params, limit + 1, offset])
    return Page(rows[:limit], offset, limit, len(rows) > limit)


def guess_field(q: str) -> str:
    """'url' for what looks like a URL or host (no spaces, a dot or slash), else 'text'."""
    q = q.strip()
    return "url" if q and " " not in q and ("/" in q or "." in q) else "text"


def _like(word: str) -> str:
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def search(
    cur: duckdb.DuckDBPyConnection, index: Path, q: str, where: str, limit: int, offset: int
) -> Page:
    """Compared pages whose URL or title (`where='url'`) or text (`'text'`) holds every word.

    URL search is ILIKE on `pages` (a URL's pieces are not words: "docs.example/3.1" should
    match where it stands), in crawl order. Text search asks the run's word index
    (`search_index`: what matches, and the order: the title holding every word first, then
    the URL, then crawl order; someone searching "TarFile" wants the TarFile page before the
    pages that mention it), then reads only the page of hits from the run, each with a
    snippet cut around its first word.
    """
    notes: list[str] = []  # words of the query not searched as written
    if where == "url":
        words = q.split() or [""]
        conds = " AND ".join(
            ["(p.url ILIKE ? ESCAPE '\\' OR p.title ILIKE ? ESCAPE '\\')"] * len(words)
        )
        params = [x for w in words for x in (_like(w), _like(w))]
        page = paged(
            cur,
            f"SELECT {PAGE_COLUMNS}, NULL AS snippet FROM pages AS p "
            f"WHERE p.skipped_reason IS NULL AND {conds}",
            params,
            limit,
            offset,
        )
    else:
        query = Query.parse(q)
        ids = search_index.search(index, query, limit + 1, offset) if query else []
        page = Page(_hits(cur, ids[:limit], query), offset, limit, len(ids) > limit)
        notes = list(query.notes)
    page.extra = {"q": q, "field": where, "notes": notes}
    return page


def _hits(cur: duckdb.DuckDBPyConnection, ids: list[int], query: Query) -> list[dict[str, Any]]:
    """The rows of pages `ids`, in that order, each with its snippet: the text around the
    first query word, white space collapsed (one query for the page of hits; `= ANY` lets
    DuckDB skip the row groups that hold none of them)."""
    if not ids:
        return []
    rows = fetch(
        cur,
        f"SELECT {PAGE_COLUMNS}, t.text FROM pages AS p JOIN page_text AS t USING (doc_id) "
        "WHERE p.doc_id = ANY(?) AND t.doc_id = ANY(?)",
        [ids, ids],
    )
    by_id = {r["doc_id"]: r for r in rows}
    first = query.pattern(0)
    hits = []
    for doc_id in ids:
        row = by_id[doc_id]
        text = _SPACE.sub(" ", row.pop("text"))
        found = first.search(text)
        start = max(0, found.start() - 80) if found else 0
        hits.append({**row, "snippet": text[start : start + SNIPPET]})
    return hits


def overview(cur: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """Counts for the home page (one pass over `pages`)."""
    rows = fetch(
        cur,
        "SELECT count(*) AS records, count(*) FILTER (WHERE skipped_reason IS NULL) AS compared, "
        "count(*) FILTER (WHERE skipped_reason IS NULL AND NOT is_representative) AS duplicates, "
        "count(DISTINCT host) AS hosts FROM pages",
        [],
    )
    clusters = cur.execute("SELECT count(*), max(size) FROM clusters").fetchone()
    return {**rows[0], "clusters": clusters[0], "largest_cluster": clusters[1]}


def largest_clusters(cur: duckdb.DuckDBPyConnection, limit: int, offset: int) -> Page:
    """Clusters by size (the `clusters` table is stored in that order)."""
    return paged(
        cur,
        "SELECT cluster_id, size, n_hosts, n_distinct_texts, min_similarity, "
        "representative_doc_id, representative_url, representative_title FROM clusters "
        "ORDER BY size DESC, cluster_id",
        [],
        limit,
        offset,
    )


def cluster(cur: duckdb.DuckDBPyConnection, cluster_id: int) -> dict[str, Any] | None:
    """A cluster's header row, or None (a page alone is a cluster of one, not listed)."""
    rows = fetch(
        cur,
        "SELECT cluster_id, size, n_hosts, n_distinct_texts, min_similarity, "
        "representative_doc_id, representative_url, representative_title "
        "FROM clusters WHERE cluster_id = ?",
        [cluster_id],
    )
    return rows[0] if rows else None


def cluster_members(
    cur: duckdb.DuckDBPyConnection, cluster_id: int, limit: int, offset: int
) -> Page:
    """Members: the representative first, then by similarity to it."""
    return paged(
        cur,
        f"SELECT {PAGE_COLUMNS} FROM pages AS p WHERE p.cluster_id = ? "
        "ORDER BY NOT p.is_representative, p.similarity_to_representative DESC, p.doc_id",
        [cluster_id],
        limit,
        offset,
    )


def cluster_pairs(cur: duckdb.DuckDBPyConnection, cluster_id: int, limit: int = 50) -> list[dict]:
    """The verified pairs inside a cluster, most similar first."""
    return fetch(
        cur,
        """
        WITH m AS (SELECT doc_id, url FROM pages WHERE cluster_id = ?)
        SELECT x.doc_a, a.url AS url_a, x.doc_b, b.url AS url_b, x.similarity, x.kind
        FROM pairs AS x JOIN m AS a ON a.doc_id = x.doc_a JOIN m AS b ON b.doc_id = x.doc_b
        ORDER BY x.similarity DESC, x.doc_a, x.doc_b LIMIT ?
        """,
        [cluster_id, limit],
    )


def page(cur: duckdb.DuckDBPyConnection, doc_id: int) -> dict[str, Any] | None:
    """One record with its fetch details."""
    rows = fetch(
        cur,
        f"SELECT {PAGE_COLUMNS}, p.status, p.content_type, p.payload_bytes, p.n_tokens, "
        "CAST(p.fetched_at AS VARCHAR) AS fetched_at, p.skipped_reason, p.exact_fp, "
        "p.class_id FROM pages AS p "
        "WHERE p.doc_id = ?",
        [doc_id],
    )
    return rows[0] if rows else None


def text(cur: duckdb.DuckDBPyConnection, doc_id: int) -> str | None:
    row = cur.execute("SELECT text FROM page_text WHERE doc_id = ?", [doc_id]).fetchone()
    return row[0] if row else None


def pair_similarity(cur: duckdb.DuckDBPyConnection, a: int, b: int) -> float | None:
    """The verified similarity of a pair, in either orientation, if the scan verified it."""
    row = cur.execute(
        "SELECT max(similarity) FROM pairs WHERE (doc_a = ? AND doc_b = ?) "
        "OR (doc_a = ? AND doc_b = ?)",
        [a, b, b, a],
    ).fetchone()
    return None if row is None or row[0] is None else float(row[0])


def _parquet(path: Path) -> str:
    return f"read_parquet('{sql_path(path)}')"


def mirrors(cur: duckdb.DuckDBPyConnection, path: Path, limit: int, offset: int) -> Page:
    """Mirror pairs from `mirrors.parquet`, in its order (originals with the most evidence)."""
    return paged(
        cur,
        "SELECT host_a, host_b, shared_pages, suffix_matches, suffix_share, kind, verdict, "
        f"alias_reason FROM {_parquet(path)}",
        [],
        limit,
        offset,
    )


def collections(cur: duckdb.DuckDBPyConnection, path: Path, limit: int, offset: int) -> Page:
    """Collection clusters by cardinality, then size (the paper's table order)."""
    return paged(
        cur,
        "SELECT collection_cluster_id, description, cardinality, size, pages, principal_url "
        f"FROM {_parquet(path)} ORDER BY cardinality DESC, size DESC, collection_cluster_id",
        [],
        limit,
        offset,
    )


def collection_copies(cur: duckdb.DuckDBPyConnection, path: Path, cid: int) -> list[dict]:
    """The copies of one collection cluster, the principal first."""
    return fetch(
        cur,
        "SELECT collection_id, host, pages, links_from_other_sites, is_principal, root_url, "
        f"prefix FROM {_parquet(path)} WHERE collection_cluster_id = ? "
        "ORDER BY NOT is_principal, pages DESC, collection_id",
        [cid],
    )


def collection_pages(
    cur: duckdb.DuckDBPyConnection, path: Path, collection_id: int, limit: int, offset: int
) -> Page:
    """The pages of one copy (a collection), its root first."""
    return paged(
        cur,
        f"SELECT c.doc_id, c.url, c.is_root, p.cluster_id, p.title FROM {_parquet(path)} AS c "
        "JOIN pages AS p USING (doc_id) WHERE c.collection_id = ? "
        "ORDER BY NOT c.is_root, c.url",
        [collection_id],
        limit,
        offset,
    )
