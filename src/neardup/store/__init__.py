"""The run directory: Parquet tables, a DuckDB database of views over them, and the sketch
matrices."""

from neardup.store.run import (
    EXPORTED_TABLES,
    RunError,
    anchor_views,
    build_store,
    load_settings,
    load_summary,
    open_run,
    read_sql,
    sql_path,
)

__all__ = [
    "EXPORTED_TABLES",
    "RunError",
    "anchor_views",
    "build_store",
    "load_settings",
    "load_summary",
    "open_run",
    "read_sql",
    "sql_path",
]
