"""`python -m neardup.cli.spark_classes`: the Spark driver JVM's class archive written, in a
process of its own (`neardup precompile` runs it; `spark/jvm_archive.py` says what it buys).

A process of its own, because the archive is written by the JVM as it exits, and the JVM
is the process's: it runs a small scan of a generated crawl on Spark (the classes a scan
loads: its Arrow tasks, the sorted Parquet writes, the links' joins), stops the JVM, waits
for it, and prints where the archive went."""

from __future__ import annotations

import contextlib
import io
import tempfile
from pathlib import Path
from typing import Any


def main() -> None:
    from neardup.cli.main import build_app
    from neardup.pipeline.executors.spark.jvm_archive import record_archive
    from neardup.pipeline.executors.spark.session import DEFAULT_CONF

    app = build_app()

    def run(*args: str) -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # the commands' own reports
            app(list(args), standalone_mode=False)

    with tempfile.TemporaryDirectory(prefix="neardup-spark-classes-") as folder:
        work = Path(folder)
        run("demo-crawl", str(work / "crawl"), "--pages", "12")
        warcs = sorted(str(p) for p in (work / "crawl" / "warc").glob("*.warc.gz"))

        def scan(session: Any) -> None:
            run("scan", *warcs, "--out", str(work / "run"), "--engine", "spark", "-q")

        print(record_archive(DEFAULT_CONF, scan))


if __name__ == "__main__":
    main()
