"""A scan's clusters read straight from its DuckDB file: the reference the index's groups
are compared with (the scan computed them, not the index)."""

from __future__ import annotations

from pathlib import Path

import duckdb


def scan_groups(run: Path) -> set[frozenset[str]]:
    """The scan's clusters as sets of URLs, those of two URLs or more."""
    con = duckdb.connect(str(run / "neardup.duckdb"), read_only=True)
    try:
        rows = con.execute(
            "SELECT list(DISTINCT url) FROM pages WHERE cluster_size >= 2 GROUP BY cluster_id"
        ).fetchall()
    finally:
        con.close()
    return {frozenset(urls) for (urls,) in rows if len(urls) >= 2}
