"""The SQL files shipped inside the package (package data), read the same way everywhere.

Each subsystem keeps its queries next to its code (`store/sql`,
`service/sql`, `linkgraph/sql`, `crawls/sql`); this module is the one place that knows how
to open them from an installed package, a wheel or a source checkout.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importlib.resources.abc is new in Python 3.11
    from importlib.resources.abc import Traversable


def sql_folder(folder: str) -> Traversable:
    """`neardup/<folder>` (parts separated by '/') as a package resource."""
    place = resources.files("neardup")
    for part in folder.split("/"):
        place = place.joinpath(part)
    return place


def package_sql(folder: str, name: str) -> str:
    """The text of the SQL file `neardup/<folder>/<name>`."""
    return sql_folder(folder).joinpath(name).read_text(encoding="utf-8")


def sql_path(path: Path) -> str:
    """An absolute path as the body of a DuckDB string literal (single quotes doubled)."""
    return path.resolve().as_posix().replace("'", "''")
