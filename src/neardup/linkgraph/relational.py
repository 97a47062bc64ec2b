"""Helpers shared by the link-graph analyses (collections, mirrors, avoid-list, roll-up).

Those analyses are relational: their queries live in `neardup/linkgraph/sql/*.sql` and run
on DuckDB (the embedded engine) or on Spark SQL
(`neardup.pipeline.executors.spark.sql_connection`), written in the SQL both accept: named
`$parameters`, standard joins, window functions, no list lambdas. Where the dialects cannot
agree, `<step>.spark.sql` holds the Spark spelling of `<step>.sql` and says why. The steps
see a `Connection`, never which engine is behind it.

The one step SQL does badly, connected components, is done here on integer ids (`kernels.graph`),
and the labels go back to SQL as an Arrow table (docs/spark_relational.md says why that
stays on the driver).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from neardup.kernels.graph import Graph, connected_components
from neardup.pipeline.executors import ENGINES
from neardup.store import open_run
from neardup.store.sql_files import sql_folder

SQL_PACKAGE = "linkgraph/sql"


class Connection(Protocol):
    """What the relational steps need of a connection: DuckDB's, or the Spark adapter."""

    def execute(self, statement: str, parameters: Any = ..., /) -> Any: ...

    def sql(self, query: str, *, params: Any = ...) -> Any: ...

    def register(self, view_name: str, python_object: Any, /) -> Any: ...

    def unregister(self, view_name: str, /) -> Any: ...

    def close(self) -> None: ...


def dialect_of(con: Connection) -> str:
    """`duckdb` or the dialect a connection adapter declares (`spark`)."""
    return getattr(con, "dialect", "duckdb")


def read_sql(name: str, dialect: str = "duckdb") -> str:
    """The text of `neardup/linkgraph/sql/<name>` (package data), or of its variant
    `<stem>.<dialect>.sql` when the step cannot be written once for both engines."""
    folder = sql_folder(SQL_PACKAGE)
    if dialect != "duckdb":
        variant = folder.joinpath(name.removesuffix(".sql") + f".{dialect}.sql")
        if variant.is_file():
            return variant.read_text(encoding="utf-8")
    return folder.joinpath(name).read_text(encoding="utf-8")


def _used(text: str, params: dict[str, Any]) -> dict[str, Any] | None:
    """The parameters a statement names (DuckDB rejects the others)."""
    used = {k: v for k, v in params.items() if f"${k}" in text}
    return used or None


def statements(text: str) -> list[str]:
    """The statements of an SQL file: split at a `;` that ends a line (none of ours has one
    inside a string), comment-only chunks dropped."""
    chunks = re.split(r";[ \t]*(?:\n|$)", text)
    code = (
        c
        for c in chunks
        if any(ln.strip() and not ln.strip().startswith("--") for ln in c.splitlines())
    )
    return [c.strip() for c in code]


def run_sql(con: Connection, name: str, **params: Any) -> None:
    """Execute the statements of one SQL file; `params` fill their `$name` placeholders.

    One statement at a time, as DuckDB binds parameters for a single statement only.
    """
    for statement in statements(read_sql(name, dialect_of(con))):
        used = _used(statement, params)
        if used:
            con.execute(statement, used)
        else:
            con.execute(statement)


def query_sql(con: Connection, name: str, **params: Any) -> pa.Table:
    """The result of the one query in an SQL file, as an Arrow table."""
    text = read_sql(name, dialect_of(con))
    return con.sql(text, params=_used(text, params)).to_arrow_table()


def query(con: Connection, text: str, **params: Any) -> dict[str, np.ndarray]:
    """A short inline query (ids and counts only) as NumPy columns."""
    return con.sql(text, params=_used(text, params)).fetchnumpy()


def connect(
    run: str | Path,
    engine: str = "embedded",
    spark_master: str | None = None,
    spark_conf: dict[str, str] | None = None,
) -> Connection:
    """A connection to a finished run on which temporary tables are allowed.

    embedded: read-only DuckDB on the run's database. spark: a Spark SQL connection whose
    `pages` and `links` are the run's Parquet exports (the session `spark-submit` made, else a
    local one on `spark_master`). The analyses take either, so the engine is chosen here only.
    """
    if engine == "embedded":
        return open_run(run)
    if engine == "spark":
        from neardup.pipeline.executors.spark.session import spark_session
        from neardup.pipeline.executors.spark.sql_connection import SparkSQLConnection

        return SparkSQLConnection.for_run(run, spark_session(spark_master, spark_conf))
    raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")


def components(ids: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Connected components of the graph on `ids` with edges (a[i], b[i]), as labels.

    Each node is labelled with the smallest id of its component, so labels are stable
    whatever order the graph is visited in. The components themselves come from
    `kernels.graph`, as everywhere else. Edges whose ends are not in `ids` are an error.
    """
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size == 0:
        return ids.copy()
    order = np.argsort(ids, kind="stable")
    sorted_ids = ids[order]
    ia, ib = (_positions(sorted_ids, np.asarray(x, dtype=np.int64)) for x in (a, b))
    # nodes are positions in id order, so a component's smallest node is its smallest id
    labels = connected_components(Graph.from_edges(ids.size, ia, ib))
    out = np.empty_like(ids)
    out[order] = sorted_ids[labels]
    return out


def _positions(sorted_ids: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Position of each value among the sorted ids (each must be present)."""
    pos = np.searchsorted(sorted_ids, values)
    if values.size and (pos.max() >= sorted_ids.size or (sorted_ids[pos] != values).any()):
        raise ValueError("edge endpoint not among the graph's ids")
    return pos


def register_table(con: Connection, name: str, data: pa.Table | dict) -> None:
    """Materialise an Arrow table (or a dict of columns) as a temporary table for SQL steps."""
    table = data if isinstance(data, pa.Table) else pa.table(data)
    con.register("_neardup_arrow", table)
    try:
        con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS SELECT * FROM _neardup_arrow")
    finally:
        con.unregister("_neardup_arrow")
