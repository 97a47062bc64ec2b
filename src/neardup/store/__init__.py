"""The run directory: a DuckDB database, Parquet exports and the sketch matrices."""

from neardup.store.run import (
    EXPORTED_TABLES,
    RunError,
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
    "build_store",
    "load_settings",
    "load_summary",
    "open_run",
    "read_sql",
    "sql_path",
]
