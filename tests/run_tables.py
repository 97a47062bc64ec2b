"""Two runs' tables compared the way a change that must not alter results is judged: every
Parquet table with DuckDB `EXCEPT ALL` both ways (rows, with their repeats), every matrix
value for value."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np


def tables_differ(a: Path, b: Path, skip: tuple[str, ...] = ()) -> list[str]:
    """The tables (`NAME.parquet`) and matrices (`NAME.npy`) of run `a` that differ from
    run `b`'s, but those named in `skip`."""
    con = duckdb.connect()
    query = "SELECT * FROM read_parquet('{}') EXCEPT ALL SELECT * FROM read_parquet('{}')"
    differ = []
    for table in sorted(p.name for p in a.glob("*.parquet") if p.name not in skip):
        for one, other in ((a, b), (b, a)):
            if con.execute(query.format(one / table, other / table)).fetchall():
                differ.append(table)
    for array in sorted(p.name for p in a.glob("*.npy") if p.name not in skip):
        if not np.array_equal(np.load(a / array), np.load(b / array)):
            differ.append(array)
    return differ
