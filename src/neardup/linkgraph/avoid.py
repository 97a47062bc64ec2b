"""The crawler avoid-list: what a crawler can skip next time, and what that saves.

Cho et al. (2000, section 5.1) fed their crawler the replicated collections and the hosts
with several names it had found; the next crawl fetched far fewer copies. The list here has
three kinds of entries, each a scheme-less URL prefix (`host/path/`):

* `alias`: the non-preferred name of a host alias pair (one server under two names);
* `mirror`: a host whose compared pages are nearly all (`full_coverage`) in clusters shared
  with a confirmed mirror partner that is kept: the whole host is a copy;
* `replica`: the prefix of each non-principal copy of a replicated collection, when its host
  is not already listed as a whole.

The side kept is the likely original (see `mirrors.py` and `collections.py` for the ranks),
so a chain of copies keeps its best-linked member. Savings are the records fetched under the
prefixes and their payload bytes, each record counted once.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from neardup.linkgraph.collections import CollectionOptions, Collections, find_collections
from neardup.linkgraph.mirrors import MirrorOptions, Mirrors, find_mirrors
from neardup.linkgraph.relational import Connection, connect, query, register_table, run_sql

AVOID_FILE = "avoid_list.parquet"
AVOID_TEXT = "avoid_list.txt"


@dataclass
class AvoidList:
    """entries: prefix, host, reason, kept (the copy to crawl instead), detail, pages, bytes.

    pages/bytes count each fetched record once (under its first entry); the totals compare
    them with the whole crawl.
    """

    entries: pa.Table
    pages: int
    bytes: int
    crawl_pages: int
    crawl_bytes: int

    def write(self, out_dir: str | Path) -> list[Path]:
        """avoid_list.parquet and avoid_list.txt (one prefix a line, for a crawler's config)."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(self.entries, out / AVOID_FILE)
        lines = self.entries.column("prefix").to_pylist()
        (out / AVOID_TEXT).write_text("".join(f"{p}\n" for p in lines), encoding="utf-8")
        return [out / AVOID_FILE, out / AVOID_TEXT]


def _bare(url_prefix: str) -> str:
    """`https://host/path/` -> `host/path/`."""
    return url_prefix.split("://", 1)[-1]


def _entries(collections: Collections, mirrors: Mirrors) -> list[dict]:
    """Entries in a fixed order: aliases, whole hosts, then collection replicas."""
    entries: list[dict] = []
    whole: set[str] = set()
    pairs = mirrors.pairs.to_pylist()
    for row in pairs:
        if row["kind"] == "alias" and row["host_b"] not in whole:
            whole.add(row["host_b"])
            detail = f"alias ({row['alias_reason']})"
            entries.append(
                dict(host=row["host_b"], reason="alias", kept=row["host_a"], detail=detail)
            )
    full = mirrors.options.full_coverage
    copies: dict[str, list[dict]] = {}
    for row in pairs:
        covered = row["shared_pages"] >= full * row["pages_b"]
        if row["kind"] != "alias" and row["verdict"] != "unconfirmed" and covered:
            copies.setdefault(row["host_b"], []).append(row)
    for host in sorted(copies):
        if host in whole:
            continue
        # keep the best-linked partner, then the one sharing most, then by name
        best = min(
            (r for r in copies[host] if r["host_a"] not in whole),
            key=lambda r: (-r["links_in_a"], -r["shared_pages"], r["host_a"]),
            default=None,
        )
        if best is None:
            continue
        whole.add(host)
        detail = f"{best['kind']}: {best['shared_pages']} of {best['pages_b']} pages shared"
        entries.append(dict(host=host, reason="mirror", kept=best["host_a"], detail=detail))
    for e in entries:
        e["prefix"] = e["host"] + "/"
    principal = {
        r["collection_cluster_id"]: r["prefix"]
        for r in collections.copies.to_pylist()
        if r["is_principal"]
    }
    titles = {
        r["collection_cluster_id"]: r["description"] for r in collections.clusters.to_pylist()
    }
    for r in collections.copies.to_pylist():
        if r["is_principal"] or r["host"] in whole or not r["prefix"]:
            continue
        cid = r["collection_cluster_id"]
        entries.append(
            dict(
                host=r["host"],
                reason="replica",
                kept=_bare(principal.get(cid) or ""),
                detail=f"collection {cid}: {titles.get(cid, '')} ({r['pages']} pages)",
                prefix=_bare(r["prefix"]),
            )
        )
    return entries


def build_avoid_list(
    con: Connection,
    collections: Collections | None = None,
    mirrors: Mirrors | None = None,
) -> AvoidList:
    """The avoid-list of the run behind `con` (collections and mirrors found if not given)."""
    collections = collections or find_collections(con, CollectionOptions())
    mirrors = mirrors or find_mirrors(con, MirrorOptions())
    entries = _entries(collections, mirrors)
    table = pa.table(
        {
            "entry_order": pa.array(range(len(entries)), pa.int64()),
            "prefix": pa.array([e["prefix"] for e in entries], pa.string()),
            "host": pa.array([e["host"] for e in entries], pa.string()),
            "reason": pa.array([e["reason"] for e in entries], pa.string()),
            "kept": pa.array([e["kept"] for e in entries], pa.string()),
            "detail": pa.array([e["detail"] for e in entries], pa.string()),
        }
    )
    register_table(con, "avoid_entries", table)
    run_sql(con, "avoid_savings.sql")
    per_entry = con.sql(
        "SELECT e.*, count(h.doc_id) AS pages, CAST(coalesce(sum(h.bytes), 0) AS BIGINT) AS bytes "
        "FROM avoid_entries AS e LEFT JOIN avoid_hits AS h USING (entry_order) "
        "GROUP BY ALL ORDER BY e.entry_order"
    ).to_arrow_table()
    totals = query(
        con,
        "SELECT count(*) AS n, CAST(coalesce(sum(payload_bytes), 0) AS BIGINT) AS b FROM pages "
        "WHERE coalesce(record_type, 'response') NOT IN ('request', 'warcinfo', 'metadata')",
    )
    return AvoidList(
        entries=per_entry.drop_columns(["entry_order"]),
        pages=int(sum(per_entry.column("pages").to_pylist())),
        bytes=int(sum(per_entry.column("bytes").to_pylist())),
        crawl_pages=int(totals["n"][0]),
        crawl_bytes=int(totals["b"][0]),
    )


def avoid_list_from_run(
    run: str | Path,
    collection_options: CollectionOptions | None = None,
    mirror_options: MirrorOptions | None = None,
) -> AvoidList:
    """`build_avoid_list` on a finished run directory."""
    con = connect(run)
    try:
        collections = find_collections(con, collection_options)
        mirrors = find_mirrors(con, mirror_options)
        return build_avoid_list(con, collections, mirrors)
    finally:
        con.close()
