"""Spark's partitioned Parquet datasets -> the run's staging files, streamed by DuckDB.

Spark writes each table as a folder of part files in no particular order; the store build
(shared by both engines) reads the embedded engine's layout: one Parquet file per table in
document order, plus the signature matrix as `signatures.npy`. DuckDB sorts out of core,
so this step streams, whatever the crawl's size.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.config import Settings
from neardup.kernels import SIGNATURE_DTYPE
from neardup.pipeline.executors.spark.kernels import matrix_of
from neardup.pipeline.steps.sketch import SKETCHES_SCHEMA
from neardup.store import sql_path


def _source(folder: Path) -> str | None:
    """A read_parquet() argument for a Spark output folder, or None when it has no parts."""
    if not any(folder.glob("*.parquet")):
        return None
    return f"read_parquet('{sql_path(folder)}/*.parquet')"


class Localizer:
    """Copies Spark's tables into the staging directory with one DuckDB connection."""

    def __init__(self, work: Path, staging: Path, threads: int) -> None:
        self.work = work
        self.staging = staging
        tmp = work / "duckdb_tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        self.con = duckdb.connect()
        self.con.execute(f"SET threads = {max(1, threads)}")
        self.con.execute("SET memory_limit = '512MB'")
        self.con.execute(f"SET temp_directory = '{sql_path(tmp)}'")

    def close(self) -> None:
        self.con.close()

    def copy(
        self, name: str, columns: str, order: str, schema: pa.Schema, row_group: int = 65536
    ) -> int:
        """`name`'s rows in `order` into staging/name.parquet; returns the row count."""
        source = _source(self.work / name)
        target = self.staging / f"{name}.parquet"
        if source is None:
            pq.write_table(schema.empty_table(), target, compression="zstd")
            return 0
        reader = self.con.sql(f"SELECT {columns} FROM {source} ORDER BY {order}").to_arrow_reader(
            row_group
        )
        rows = 0
        with pq.ParquetWriter(target, schema, compression="zstd") as writer:
            for batch in reader:
                writer.write_table(pa.Table.from_batches([batch]).cast(schema))
                rows += batch.num_rows
        return rows

    def sketches(self, settings: Settings) -> None:
        """`sketches.parquet` (fingerprints) and the signature and super-shingle matrices,
        rows in document order, as the embedded sketch stage writes them."""
        source = _source(self.work / "sketches")
        n = 0 if source is None else self.con.sql(f"SELECT count(*) FROM {source}").fetchall()[0][0]
        k = settings.num_perm
        n_ss = settings.supershingle_count if settings.has_supershingles else 0
        signatures = np.lib.format.open_memmap(
            self.staging / "signatures.npy", mode="w+", dtype=SIGNATURE_DTYPE, shape=(n, k)
        )
        supers = np.lib.format.open_memmap(
            self.staging / "supershingles.npy", mode="w+", dtype=np.int64, shape=(n, n_ss)
        )
        docs = np.empty(n, dtype=np.int64)
        row = 0
        with pq.ParquetWriter(
            self.staging / "sketches.parquet", SKETCHES_SCHEMA, compression="zstd"
        ) as writer:
            if source is not None:
                query = f"SELECT * FROM {source} ORDER BY doc_id"
                for batch in self.con.sql(query).to_arrow_reader(65536):
                    m = batch.num_rows
                    part = slice(row, row + m)
                    signatures[part] = matrix_of(batch.column("minhash"), k, np.int32).view(
                        SIGNATURE_DTYPE
                    )
                    if n_ss:
                        supers[part] = matrix_of(batch.column("supers"), n_ss, np.int64)
                    docs[part] = np.asarray(batch.column("doc_id"))
                    table = pa.Table.from_batches([batch]).select(SKETCHES_SCHEMA.names)
                    writer.write_table(table.cast(SKETCHES_SCHEMA))
                    row += m
        signatures.flush()
        supers.flush()
        del signatures, supers
        np.save(self.staging / "signature_docs.npy", docs)
