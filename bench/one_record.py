"""What a one-record scan costs, and what its libraries alone cost to load (issue 29).

1. `neardup scan one.jsonl` in a fresh process, CPU-seconds (user + system of the child):
   this checkout against another commit's code (`--before SRC`, a `git worktree`'s `src`),
   alternating run by run after one untimed round (bytecode, page cache); `--before-python`
   runs the other side with another virtual environment's interpreter (other library
   versions: typer 0.29 against the 0.28 that pyproject.toml now asks for).
2. The floor under it: a fresh Python importing only the libraries such a scan needs,
   each group alone and all together, with one BLAS thread as the command now asks
   (`neardup.startup.one_blas_thread`), and `import numpy` with OpenBLAS's default.

    .venv/bin/python bench/one_record.py --runs 5 [--before /tmp/before/src]
        [--before-python /tmp/other-venv/bin/python]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernels_ahead import PYTHON, _child_cpu, scan_one_record

IMPORTS = {
    "python alone": "pass",
    "numpy": "import numpy",
    "numpy, OpenBLAS's default threads": "import numpy",
    "pyarrow.parquet": "import pyarrow.parquet",
    "duckdb": "import duckdb",
    "typer": "import typer",
    "rich's console, progress and table": "import rich.console, rich.progress, rich.table",
    "all of the above": (
        "import numpy, pyarrow.parquet, duckdb, typer, rich.console, rich.progress, rich.table"
    ),
}


def _env(**extra: str) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OPENBLAS_NUM_THREADS")}
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    return {**base, **extra}


def sides(before: str | None, before_python: str | None) -> dict[str, tuple[str, dict[str, str]]]:
    """The interpreter and environment of each code compared: this checkout ("now"), and
    with `before` (another commit's source folder) or `before_python` (another virtual
    environment's interpreter), "before"."""
    found = {"now": (PYTHON, _env())}
    if before or before_python:
        found["before"] = (before_python or PYTHON, _env(PYTHONPATH=before) if before else _env())
    return found


def one_record(runs: int, before: str | None, before_python: str | None) -> dict[str, list[float]]:
    return scan_one_record(runs, sides(before, before_python))


def imports(runs: int) -> dict[str, list[float]]:
    seen: dict[str, list[float]] = {name: [] for name in IMPORTS}
    for run in range(runs + 1):
        for name, code in IMPORTS.items():
            threads = {} if "default threads" in name else {"OPENBLAS_NUM_THREADS": "1"}
            cpu = _child_cpu([PYTHON, "-c", code], _env(**threads))
            if run:
                seen[name].append(cpu)
    return seen


def _row(name: str, values: list[float]) -> str:
    return f"| {name} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", help="source folder of another commit's code")
    parser.add_argument("--before-python", help="the interpreter of another virtual environment")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    print("\n| a one-record scan | CPU-s, median | range |\n|---|---:|---:|")
    for name, values in one_record(args.runs, args.before, args.before_python).items():
        print(_row(name, values))
    print("\n| a fresh Python importing | CPU-s, median | range |\n|---|---:|---:|")
    for name, values in imports(args.runs).items():
        print(_row(name, values))


if __name__ == "__main__":
    main()
