"""Build, export and open a run directory.

A run directory holds one Parquet file (or, from the Spark engine, one folder of Parquet part
files) per table, to join from any tool; `neardup.duckdb`, whose tables are views over those
files, for SQL; `signatures.npy` (min-hash rows, read by later stages and the query service),
`settings.json` and `summary.json`. Each row is stored once, in Parquet: the database names
the files relative to the run. It is built complete in a staging directory and renamed into
place, so a killed scan leaves either the old run or the new one, never half of one.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from neardup.config import Settings
from neardup.ingest.commoncrawl import WAT_REASON
from neardup.kernels import SIGNATURE_DTYPE
from neardup.store.pages_table import write_pages_table
from neardup.store.sql_files import package_sql, sql_path

DB_NAME = "neardup.duckdb"
EXPORTED_TABLES = ("pages", "pairs", "containment", "clusters", "links")  # the sorted ones
ORDER_BY = {
    "pages": "doc_id",
    "pairs": "doc_a, doc_b",
    "containment": "doc_small, doc_large",
    "clusters": "size DESC, cluster_id",
    "links": "src_doc",
}
# Staged tables the build re-sorts into a file of the same name; renamed aside first.
RESTAGED = ("pairs", "containment", "links")
INTERMEDIATE = (
    "pages_raw.parquet",
    "sketch_columns.npy",  # steps/sketch.py's PAGE_COLUMNS
    "assignments.parquet",
    *(f"{table}.staged.parquet" for table in RESTAGED),
    "duckdb_tmp",
)
PARQUET_OPTIONS = "FORMAT parquet, COMPRESSION zstd"
FIGURES_NAME = "figures.json"  # a dataset run's summary figures, computed where the data is
DATASET_TABLES = ("pages", "pairs", "containment", "clusters", "links", "page_text", "sketches")


class RunError(RuntimeError):
    """A run directory that is missing, incomplete or made with other settings."""


def read_sql(name: str) -> str:
    return package_sql("store/sql", name)


def sql_over(name: str, **tables: str) -> str:
    """The store's query `name` (a single statement) read from other tables: each `FROM
    table` of `tables`' names reads its table expression instead (the summary's and the
    skips' SQL over a Spark run's datasets or over one input's part file)."""
    sql = read_sql(name).strip().rstrip(";")
    for table, expression in tables.items():
        sql = sql.replace(f"FROM {table}", f"FROM {expression}")
    return sql


def machine_memory_bytes() -> int:
    """This machine's memory, or the container's limit when one is set (cgroup v2 or v1)."""
    total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    for limit_file in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(limit_file).read_text(encoding="ascii").strip()
        except OSError:
            continue
        if text.isdigit():
            total = min(total, int(text))
    return total


def memory_limit(share: float = 0.25, floor_mib: int = 512) -> str:
    """A DuckDB memory limit derived from the machine: `share` of its memory, at least
    `floor_mib`. DuckDB spills past it, so the limit bounds memory, not the data size; a
    fixed small limit instead fails the queries that cannot spill (an ORDER BY with wide
    rows pinned 488 MiB and stopped)."""
    mib = max(floor_mib, int(machine_memory_bytes() * share) >> 20)
    return f"{mib}MB"


# The embedded store's DuckDB budget per thread, and its least. Its one query that sorted
# every page's wide row now sorts a range of them (store/pages_table.py), so what is left to
# hold is the distinct counts of the summary and the sorts of the pairs and links, which
# spill: at four million pages a budget of 512 MB took the same time as a quarter of the
# machine (12.7-13.2 s against 12.3 s), and the store's peak fell from 871 to 490-567 MiB.
_STORE_MIB_PER_THREAD = 128
_STORE_MIB_LEAST = 512


def store_memory_limit(threads: int) -> str:
    """The embedded store's DuckDB memory limit: a fixed amount per thread (at least
    `_STORE_MIB_LEAST`), never more than `memory_limit()`; it grows with the threads, not
    with the corpus."""
    budget = max(_STORE_MIB_LEAST, _STORE_MIB_PER_THREAD * max(1, threads))
    return f"{min(budget, int(memory_limit().removesuffix('MB')))}MB"


def _summary_figures(con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """The summary row of a built store (summary.sql) with its skips by reason."""
    summary = con.execute(read_sql("summary.sql")).fetchone()
    names = [d[0] for d in con.description]
    result = dict(zip(names, summary, strict=True))
    skipped = con.execute(read_sql("skipped.sql")).fetchall()
    result["skipped_by_reason"] = {reason: count for reason, count in skipped}
    return result


def is_dataset_run(path: str | Path) -> bool:
    """Whether a run (or a staging folder) holds its tables as Parquet datasets (folders of
    part files, as the Spark engine writes them) rather than single files."""
    return (Path(path) / "pages.parquet").is_dir()


def _build_dataset_store(staging: Path, settings: Settings) -> dict[str, Any]:
    """The store of a run whose tables the executors wrote as datasets: `neardup.duckdb`
    holds views over the dataset folders (paths relative to the run, resolved through
    DuckDB's `file_search_path`, which `open_run` sets, so a moved run still opens) and the
    settings; no row is copied. The summary's figures were computed where the data is and
    left in `FIGURES_NAME`; without them they are computed here, by DuckDB streaming over
    the views with a memory limit derived from the machine."""
    con = duckdb.connect(str(staging / DB_NAME))
    try:
        con.execute(f"SET file_search_path = '{sql_path(staging)}'")
        for table in DATASET_TABLES:
            if (staging / f"{table}.parquet").exists():
                con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{table}.parquet')")
        con.execute("CREATE TABLE settings AS SELECT ? AS settings_json", [settings.to_json()])
        figures_file = staging / FIGURES_NAME
        if figures_file.exists():
            result = json.loads(figures_file.read_text(encoding="utf-8"))
            figures_file.unlink()
            return result
        tmp = staging / "duckdb_tmp"
        tmp.mkdir(exist_ok=True)
        con.execute(f"SET memory_limit = '{memory_limit()}'")
        con.execute(f"SET temp_directory = '{sql_path(tmp)}'")
        result = _summary_figures(con)
    finally:
        con.close()
    shutil.rmtree(staging / "duckdb_tmp", ignore_errors=True)
    return result


def build_store(
    staging: Path,
    settings: Settings,
    workers: int,
) -> dict[str, Any]:
    """Write the run's tables as Parquet files in `staging` and a DuckDB database of views
    over them (build.sql); return the summary row. A staging folder whose tables are
    datasets (the Spark engine's) gets views over them instead (`_build_dataset_store`):
    nothing is copied through this machine."""
    if is_dataset_run(staging):
        return _build_dataset_store(staging, settings)
    for table in RESTAGED:
        (staging / f"{table}.parquet").rename(staging / f"{table}.staged.parquet")
    tmp = staging / "duckdb_tmp"
    tmp.mkdir(exist_ok=True)
    con = duckdb.connect(str(staging / DB_NAME))
    try:
        # DuckDB takes a worker process (`run_apart`) for an interactive session and would
        # draw its progress bar on stdout, in the middle of `--json`
        con.execute("SET enable_progress_bar = false")
        con.execute(f"SET threads = {max(1, workers)}")
        con.execute(f"SET memory_limit = '{store_memory_limit(workers)}'")
        con.execute(f"SET temp_directory = '{sql_path(tmp)}'")
        con.execute(f"SET file_search_path = '{sql_path(staging)}'")
        con.execute(read_sql("build_inputs.sql").format(staging=sql_path(staging)))
        write_pages_table(con, staging, settings.min_tokens)
        sql = read_sql("build.sql").format(
            staging=sql_path(staging),
            wat_reason=WAT_REASON,
            parquet=PARQUET_OPTIONS,
            clusters_of_pages=read_sql("clusters_of_pages.sql").format(pages="pages"),
        )
        con.execute(sql)
        con.execute("CREATE TABLE settings AS SELECT ? AS settings_json", [settings.to_json()])
        result = _summary_figures(con)
    finally:
        con.close()
    for name in INTERMEDIATE:
        target = staging / name
        if target.is_dir():
            shutil.rmtree(target)
        elif target.exists():
            target.unlink()
    return result


ANCHOR_TABLE = "run_location"  # the absolute path the views were last pointed at


def _views(con: duckdb.DuckDBPyConnection) -> set[str]:
    rows = con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()
    return {name for (name,) in rows}


def anchor_views(path: str | Path) -> None:
    """Point the run's views at its Parquet files by absolute path, and record that path.

    A view names its file relative to the run while the run is built in its staging folder;
    once the run is in place, absolute paths let any DuckDB client open `neardup.duckdb`
    from any directory (`duckdb run/neardup.duckdb`), as it could when the tables were
    stored inside it. A run that is moved afterwards is re-pointed by `open_run`."""
    run = Path(path).resolve()
    con = duckdb.connect(str(run / DB_NAME))
    try:
        views = _views(con)
        for table in DATASET_TABLES:
            target = run / f"{table}.parquet"
            if table in views and target.exists():
                con.execute(
                    f"CREATE OR REPLACE VIEW {table} AS "
                    f"SELECT * FROM read_parquet('{sql_path(target)}')"
                )
        con.execute(f"CREATE OR REPLACE TABLE {ANCHOR_TABLE} AS SELECT ? AS path", [str(run)])
    finally:
        con.close()


def _anchored_elsewhere(con: duckdb.DuckDBPyConnection, run: Path) -> str | None:
    """The path a run's views point at, when that is not where the run now is."""
    if not con.execute(
        "SELECT count(*) FROM duckdb_tables() WHERE table_name = ?", [ANCHOR_TABLE]
    ).fetchone()[0]:
        return None
    (anchored,) = con.execute(f"SELECT path FROM {ANCHOR_TABLE}").fetchone()
    return None if anchored == str(run.resolve()) else anchored


def open_run(path: str | Path, read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """A DuckDB connection to a finished run; a run moved since it was written has its views
    re-pointed at its files first (`anchor_views`)."""
    db = Path(path) / DB_NAME
    if not db.exists():
        raise RunError(f"{path} is not a neardup run directory (no {DB_NAME}); run `neardup scan`")
    con = duckdb.connect(str(db), read_only=read_only)
    moved_from = _anchored_elsewhere(con, Path(path))
    if moved_from is not None:
        con.close()
        try:
            anchor_views(path)
        except (duckdb.Error, OSError) as err:
            raise RunError(
                f"{path} was moved from {moved_from} and its views cannot be re-pointed "
                f"here ({err}); open it once where {db} is writable"
            ) from None
        con = duckdb.connect(str(db), read_only=read_only)
    # Views still relative (a run whose publish was cut short before `anchor_views`) resolve
    # against the run; for anchored views this changes nothing. GLOBAL: the cursors callers
    # open (the UI's, one per request) must resolve them too.
    con.execute(f"SET GLOBAL file_search_path = '{sql_path(Path(path))}'")
    return con


def load_settings(path: str | Path) -> Settings:
    settings_file = Path(path) / "settings.json"
    if not settings_file.exists():
        raise RunError(f"{path} has no settings.json: not a complete neardup run")
    return Settings.from_json(settings_file.read_text(encoding="utf-8"))


def load_summary(path: str | Path) -> dict[str, Any]:
    summary_file = Path(path) / "summary.json"
    if not summary_file.exists():
        raise RunError(f"{path} has no summary.json: not a complete neardup run")
    return json.loads(summary_file.read_text(encoding="utf-8"))


def load_signatures(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """(doc ids, signature matrix) of a run, memory-mapped."""
    run = Path(path)
    sig = np.load(run / "signatures.npy", mmap_mode="r")
    if sig.dtype != SIGNATURE_DTYPE:
        raise RunError(f"signatures in {path} are {sig.dtype}, expected {SIGNATURE_DTYPE}")
    return np.load(run / "signature_docs.npy"), sig
