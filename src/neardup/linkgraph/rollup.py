"""Search results rolled up by collection and replica (Cho et al. 2000, section 5.2).

A ranked list of URLs often shows several pages of one collection, and the same pages again
on its mirrors. The roll-up keeps one entry per collection, at the rank of its best result,
and folds under it the other pages of the collection ("more from this collection", whatever
copy they come from) and the results that are copies of a page already shown ("replicas":
same near-duplicate cluster). A page outside any collection still folds its
near-duplicates (same cluster). Each entry also lists where else its page lives in the crawl,
the paper's "Replica" link. Results the run does not know stay as they are, in rank order.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from neardup.linkgraph.collections import COLLECTIONS_FILE, CollectionOptions, find_collections
from neardup.linkgraph.relational import Connection, connect, query_sql, register_table


@dataclass
class RollupEntry:
    """One line of the rolled-up result list.

    group: `collection:<id>`, `cluster:<id>` or `url:<url>` (what the entry stands for);
    more_pages: other pages of the same collection (any copy), in rank order;
    replicas: results that are copies of a page already in the entry (same near-duplicate
    cluster as the entry page or one of its more_pages), in rank order;
    other_copies: URLs of the entry page's near-duplicates in the crawl (not in the results).
    doc_id: the entry page's doc_id in the run (None when the run does not know the URL).
    """

    rank: int
    url: str
    title: str | None
    group: str
    known: bool
    collection_id: int | None = None
    doc_id: int | None = None
    more_pages: list[str] = field(default_factory=list)
    replicas: list[str] = field(default_factory=list)
    other_copies: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def _collection_pages(run: Path | None, con: Connection) -> pa.Table:
    """collections.parquet of the run when written, else computed now (default options)."""
    if run is not None and (run / COLLECTIONS_FILE).exists():
        return pq.read_table(run / COLLECTIONS_FILE)
    return find_collections(con, CollectionOptions()).pages


def _group(row: dict) -> str:
    if row["collection_cluster_id"] is not None:
        return f"collection:{row['collection_cluster_id']}"
    if row["cluster_id"] is not None and (row["cluster_size"] or 0) >= 2:
        return f"cluster:{row['cluster_id']}"
    return f"url:{row['url']}"


def rollup(
    con: Connection,
    urls: list[str],
    collection_pages: pa.Table | None = None,
    max_copies: int = 5,
) -> list[RollupEntry]:
    """Group the ranked `urls` (best first) by collection and replica.

    `collection_pages` is a `collections.parquet` table (computed when not given). Entries
    come in the rank of their first result; inside an entry, folded results keep their rank
    order. Blank lines and repeated URLs are dropped (the first occurrence counts).
    """
    seen: set[str] = set()
    ranked = [u for u in (s.strip() for s in urls) if u and not (u in seen or seen.add(u))]
    pages = collection_pages if collection_pages is not None else _collection_pages(None, con)
    register_table(
        con, "collection_pages", pages.select(["doc_id", "collection_cluster_id", "collection_id"])
    )
    register_table(con, "ranked", pa.table({"rank": range(1, len(ranked) + 1), "url": ranked}))
    rows = query_sql(con, "rollup_lookup.sql").to_pylist()

    entries: dict[str, RollupEntry] = {}
    shown: dict[str, set[int]] = {}  # near-duplicate clusters already shown in each entry
    for row in rows:
        key = _group(row)
        entry = entries.get(key)
        if entry is None:
            entries[key] = RollupEntry(
                rank=row["rank"],
                url=row["url"],
                title=row["title"],
                group=key,
                known=row["doc_id"] is not None,
                collection_id=row["collection_id"],
                doc_id=row["doc_id"],
            )
            shown[key] = {row["cluster_id"]}
        elif row["cluster_id"] in shown[key]:
            entry.replicas.append(row["url"])
        else:
            entry.more_pages.append(row["url"])
            shown[key].add(row["cluster_id"])
    heads = [e.doc_id for e in entries.values() if e.doc_id is not None]
    register_table(con, "heads", pa.table({"doc_id": pa.array(heads, pa.int64())}))
    copies: dict[int, list[str]] = {}
    for row in query_sql(con, "rollup_replicas.sql").to_pylist():
        copies.setdefault(row["head"], []).append(row["url"])
    for entry in entries.values():
        if entry.doc_id is not None:
            entry.other_copies = copies.get(entry.doc_id, [])[:max_copies]
    return list(entries.values())


def rollup_run(run: str | Path, urls: list[str], max_copies: int = 5) -> list[RollupEntry]:
    """`rollup` on a finished run (its collections.parquet when written, else computed)."""
    con = connect(run)
    try:
        return rollup(con, urls, _collection_pages(Path(run), con), max_copies=max_copies)
    finally:
        con.close()
