"""A Spark SQL connection with the slice of DuckDB's connection API the relational steps use.

`find_collections`, `find_mirrors` (and the steps under them) talk to a connection through
five calls: `execute(statement, params)`, `sql(text, params=...)` with `.to_arrow_table()` or
`.fetchnumpy()` on the result, `register(name, arrow_table)` and `unregister(name)`. This
class answers those calls on a Spark session, so the same SQL files and the same Python run on
a cluster without knowing it:

* `$name` placeholders become SQL literals (Spark SQL has no named parameters for DDL-like
  statements, and literals let the optimizer fold `NOT FALSE OR ...` away);
* `CREATE OR REPLACE TEMP TABLE t AS q` becomes a temp view over the *materialised* result of
  `q`: a local checkpoint, or Parquet files under `work` when given. Without it every later
  step would recompute the whole chain of views (the fold loop reads `copy_assign` twenty
  times), and the lineage would grow with each round;
* Arrow tables registered become DataFrames (`spark.createDataFrame(arrow_table)`), and
  results come back through `DataFrame.toArrow()`, never through pandas.

Each connection runs in its own `SparkSession.newSession()`: temp views are per session, so
two analyses on one Spark application cannot overwrite each other's `trivial` or `link`.
`dialect = "spark"` lets `neardup.linkgraph.relational` pick a Spark variant of an SQL file
where the dialects differ (see `linkgraph/sql/*.spark.sql`).
"""

from __future__ import annotations

import itertools
import math
import re
from numbers import Integral, Real
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

# The run's tables the relational SQL reads, by view name -> Parquet export of the run.
RUN_TABLES = {"pages": "pages.parquet", "links": "links.parquet"}

_CTAS = re.compile(
    r"CREATE\s+OR\s+REPLACE\s+TEMP(?:ORARY)?\s+TABLE\s+([A-Za-z_]\w*)\s+AS\s+(.*)",
    re.IGNORECASE | re.DOTALL,
)
_PARAM = re.compile(r"\$([A-Za-z_]\w*)")
_LEADING_COMMENTS = re.compile(r"\A(?:\s*--[^\n]*(?:\n|\Z))+")


def sql_literal(value: Any) -> str:
    """`value` as a Spark SQL literal of the type DuckDB would bind it as.

    Floats are cast to DOUBLE (a bare `0.5` is a DECIMAL in Spark SQL, a DOUBLE parameter in
    DuckDB); strings escape backslashes too, since Spark SQL string literals read escapes.
    """
    if value is None:
        return "NULL"
    if isinstance(value, bool | np.bool_):
        return "TRUE" if value else "FALSE"
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, Real):
        number = float(value)
        text = repr(number) if math.isfinite(number) else f"'{number}'"
        return f"CAST({text} AS DOUBLE)"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    raise TypeError(f"no Spark SQL literal for {type(value).__name__} parameter {value!r}")


def bind(text: str, params: dict[str, Any] | None) -> str:
    """Replace the `$name` placeholders of `text` by literals; an unknown name is an error,
    as it is in DuckDB, rather than SQL that fails later with a confusing message."""
    params = params or {}

    def literal(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in params:
            raise KeyError(f"SQL parameter ${name} was not given")
        return sql_literal(params[name])

    return _PARAM.sub(literal, text)


def _clean(text: str) -> str:
    """A statement without leading comment lines and trailing semicolons (Spark's `sql()`
    takes one statement, and the CTAS pattern must see the statement's first word)."""
    return _LEADING_COMMENTS.sub("", text).strip().rstrip(";").strip()


class SparkResult:
    """A query's DataFrame, read back the ways the relational steps read DuckDB results."""

    def __init__(self, frame: Any) -> None:
        self.frame = frame

    def to_arrow_table(self) -> pa.Table:
        """The rows as Arrow, with Spark's large string/list types narrowed to DuckDB's, so
        tables compare (and write to Parquet) the same whichever engine made them."""
        return _narrow(self.frame.toArrow())

    def arrow(self) -> pa.Table:
        return self.to_arrow_table()

    def fetchnumpy(self) -> dict[str, np.ndarray]:
        """One NumPy array per column (strings as object arrays), like DuckDB's."""
        table = self.to_arrow_table()
        return {
            name: table.column(name).to_numpy(zero_copy_only=False) for name in table.column_names
        }

    def fetchall(self) -> list[tuple]:
        table = self.to_arrow_table()
        return list(zip(*(table.column(n).to_pylist() for n in table.column_names), strict=True))


def _narrow_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_large_string(t):
        return pa.string()
    if pa.types.is_large_binary(t):
        return pa.binary()
    if pa.types.is_large_list(t) or pa.types.is_list(t):
        return pa.list_(_narrow_type(t.value_type))
    return t


def _narrow(table: pa.Table) -> pa.Table:
    schema = pa.schema([pa.field(f.name, _narrow_type(f.type)) for f in table.schema])
    return table if schema.equals(table.schema) else table.cast(schema)


def _private_session(spark: Any) -> Any:
    """A new session of `spark`'s application with the SQL settings `spark` runs under.

    `newSession()` starts from the application's settings, not from those changed on `spark`
    since (say `spark.sql.shuffle.partitions` set by the caller), so those are copied over:
    the analysis runs the way its caller tuned the session.
    """
    session = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if key.startswith("spark.sql.") and spark.conf.isModifiable(key):
            session.conf.set(key, value)
    return session


class SparkSQLConnection:
    """The DuckDB-connection subset used by `neardup.linkgraph.relational`, on a Spark session.

    spark: the session to run on (a new session of its application is used, for private temp
    views). work: where to write materialised tables as Parquet (a path every executor can
    reach, on a cluster); None keeps them as local checkpoints in the executors' block stores,
    which is faster and enough when losing an executor may restart the analysis.
    """

    dialect = "spark"

    def __init__(self, spark: Any, work: str | Path | None = None) -> None:
        self.spark = _private_session(spark)
        self.work = None if work is None else str(work).rstrip("/")
        self._views: set[str] = set()
        self._serial = itertools.count()

    @classmethod
    def for_run(
        cls, run: str | Path, spark: Any | None = None, work: str | Path | None = None
    ) -> SparkSQLConnection:
        """A connection whose `pages` and `links` views read the run's Parquet exports.

        `run` may be any path Spark reads (a run copied to HDFS or S3 works as well); a local
        run that lacks the exports is refused before Spark is started.
        """
        from neardup.pipeline.executors.spark.session import spark_session
        from neardup.store import RunError

        base = str(run).rstrip("/")
        if "://" not in base:
            missing = [f for f in RUN_TABLES.values() if not (Path(base) / f).exists()]
            if missing:
                raise RunError(
                    f"{run} is not a neardup run directory (no {', '.join(missing)}); "
                    "run `neardup scan`"
                )
        con = cls(spark if spark is not None else spark_session(), work)
        for view, file in RUN_TABLES.items():
            con._view(view, con.spark.read.parquet(f"{base}/{file}"))
        return con

    def _view(self, name: str, frame: Any) -> None:
        frame.createOrReplaceTempView(name)
        self._views.add(name)

    def _materialise(self, name: str, frame: Any) -> Any:
        """The rows of `frame` computed once, cut from the plan that produced them."""
        if self.work is None:
            return frame.localCheckpoint(eager=True)
        # A fresh folder each time: a statement may read the table it replaces.
        path = f"{self.work}/{name}-{next(self._serial)}.parquet"
        frame.write.mode("overwrite").parquet(path)
        return self.spark.read.parquet(path)

    def execute(self, statement: str, params: dict[str, Any] | None = None) -> SparkSQLConnection:
        """Run one statement; `CREATE OR REPLACE TEMP TABLE` materialises into a temp view."""
        text = _clean(bind(statement, params))
        ctas = _CTAS.fullmatch(text)
        if ctas:
            name, query = ctas.groups()
            self._view(name, self._materialise(name, self.spark.sql(query)))
        else:
            self.spark.sql(text).collect()
        return self

    def sql(self, text: str, params: dict[str, Any] | None = None) -> SparkResult:
        """A query, run when its result is read (like DuckDB's relations)."""
        return SparkResult(self.spark.sql(_clean(bind(text, params))))

    def register(self, name: str, table: pa.Table | dict) -> SparkSQLConnection:
        """An Arrow table as a view (DuckDB's `register`); Spark copies it into the JVM."""
        data = table if isinstance(table, pa.Table) else pa.table(table)
        self._view(name, self.spark.createDataFrame(data))
        return self

    def unregister(self, name: str) -> SparkSQLConnection:
        self.spark.catalog.dropTempView(name)
        self._views.discard(name)
        return self

    def close(self) -> None:
        """Drop this connection's views (the Spark application stays up for its owner)."""
        for name in sorted(self._views):
            self.spark.catalog.dropTempView(name)
        self._views.clear()

    def __enter__(self) -> SparkSQLConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
