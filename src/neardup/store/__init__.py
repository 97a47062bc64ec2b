"""The run directory: Parquet tables, a DuckDB database of views over them, and the sketch
matrices.

The names below come from `neardup.store.run`, loaded on first use: importing a module of
this package (`neardup.store.rows`, which the index's page table reaches through `url_key`)
then does not load DuckDB, 30 ms of every `neardup add` that never opens a run."""

from __future__ import annotations

from typing import TYPE_CHECKING

from neardup.startup import loaded_on_first_use

if TYPE_CHECKING:
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

__getattr__ = loaded_on_first_use(__name__, dict.fromkeys(__all__, "run"))
