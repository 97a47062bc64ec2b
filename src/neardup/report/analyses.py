"""Collections, mirrors and the avoid-list of a run: read from its files, or computed.

`neardup collections`, `mirrors` and `avoid-list` write Parquet next to the scan. The report
and the UI use those files when they are there, and otherwise call the same functions
(`neardup.linkgraph`: `collections`, `mirrors`, `avoid`), so a fresh scan gets the full
report without running three more commands first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.linkgraph.avoid import AVOID_FILE, build_avoid_list
from neardup.linkgraph.collections import (
    CLUSTERS_FILE,
    COLLECTIONS_FILE,
    COPIES_FILE,
    CollectionOptions,
    Collections,
    find_collections,
)
from neardup.linkgraph.mirrors import MIRRORS_FILE, MirrorOptions, Mirrors, find_mirrors


@dataclass
class LinkAnalyses:
    """The link-graph outputs the report and UI show.

    clusters/copies/pages: `collection_clusters`, `collection_copies`, `collections` tables;
    mirrors: the `mirrors` table; avoid: the avoid-list entries (None when not asked for);
    computed: which of them were computed now rather than read from the run directory.
    """

    clusters: pa.Table
    copies: pa.Table
    pages: pa.Table
    mirrors: pa.Table
    avoid: pa.Table | None = None
    computed: list[str] = field(default_factory=list)


def _read(run: Path, *names: str) -> list[pa.Table] | None:
    paths = [run / n for n in names]
    if not all(p.exists() for p in paths):
        return None
    return [pq.read_table(p) for p in paths]


def load_link_analyses(
    run: str | Path, con: duckdb.DuckDBPyConnection, with_avoid: bool = True
) -> LinkAnalyses:
    """Collections and mirrors of the run (files first), and its avoid-list if asked."""
    run = Path(run)
    computed: list[str] = []
    coll_obj: Collections | None = None
    mirr_obj: Mirrors | None = None
    tables = _read(run, CLUSTERS_FILE, COPIES_FILE, COLLECTIONS_FILE)
    if tables is None:
        coll_obj = find_collections(con, CollectionOptions())
        tables = [coll_obj.clusters, coll_obj.copies, coll_obj.pages]
        computed.append("collections")
    clusters, copies, pages = tables
    mirror_tables = _read(run, MIRRORS_FILE)
    if mirror_tables is None:
        mirr_obj = find_mirrors(con, MirrorOptions())
        mirrors = mirr_obj.pairs
        computed.append("mirrors")
    else:
        mirrors = mirror_tables[0]
    avoid = None
    if with_avoid:
        avoid_tables = _read(run, AVOID_FILE)
        if avoid_tables is None:
            avoid = build_avoid_list(con, coll_obj, mirr_obj).entries
            computed.append("avoid-list")
        else:
            avoid = avoid_tables[0]
    return LinkAnalyses(clusters, copies, pages, mirrors, avoid, computed)


def ensure_link_files(
    run: str | Path, con: duckdb.DuckDBPyConnection, cache: Path
) -> dict[str, Path]:
    """Paths of the collections and mirrors Parquet files, computing the missing ones.

    The web UI queries these files with DuckDB's `read_parquet` per request instead of
    holding them in memory. Files the run lacks are computed once (as `neardup collections`
    and `neardup mirrors` would) and written to `cache`. Returns file name -> path.
    """
    run = Path(run)
    collection_files = (CLUSTERS_FILE, COPIES_FILE, COLLECTIONS_FILE)
    paths: dict[str, Path] = {}
    for names, compute in (
        (collection_files, lambda: find_collections(con, CollectionOptions())),
        ((MIRRORS_FILE,), lambda: find_mirrors(con, MirrorOptions())),
    ):
        for where in (run, cache):
            if all((where / n).exists() for n in names):
                paths.update({n: where / n for n in names})
                break
        else:
            compute().write(cache)
            paths.update({n: cache / n for n in names})
    return paths
