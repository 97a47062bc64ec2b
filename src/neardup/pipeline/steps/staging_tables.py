"""The files of a staging table: one Parquet file, or a folder of parts in document order.

The embedded ingest writes each table as a folder of parts, one per range of the input
(`steps/ingest_ranges.py`), as the Spark engine writes its tables; a stage that reads the
sketch pass's `sketches.parquet` finds a single file. DuckDB reads either by its name; the
stages that read row groups themselves go through `table_files` and `row_groups`.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq


def table_files(staging: Path, table: str) -> list[str]:
    """The Parquet files of `table` (`page_text`, ...), in document order."""
    path = staging / f"{table}.parquet"
    if path.is_dir():
        return [str(p) for p in sorted(path.glob("*.parquet"))]
    return [str(path)]


def row_groups(staging: Path, table: str) -> list[tuple[str, int, int]]:
    """Every row group of `table` as (file, group, rows), in document order."""
    groups = []
    for path in table_files(staging, table):
        meta = pq.read_metadata(path)
        groups.extend((path, g, meta.row_group(g).num_rows) for g in range(meta.num_row_groups))
    return groups
