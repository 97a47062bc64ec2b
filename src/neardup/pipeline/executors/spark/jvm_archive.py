"""The driver JVM's classes from an archive: a Spark session that starts in half the CPU.

Why: every Spark run of neardup starts a JVM that loads and verifies Spark's classes one by
one, about 9 CPU-s and 8 s here even compiled by the first tier only (session.DEFAULT_CONF),
before a task runs; the embedded engine has nothing of the kind, and a small add pays it
whole. HotSpot can map the classes a run loaded from an archive written at its exit
(application class-data sharing, JDK 13 and later: `-XX:ArchiveClassesAtExit`, then
`-XX:SharedArchiveFile`): a session's start and a first job then took 4.2-5.1 CPU-s
against 7.9-9.0 (docs/benchmarks.md, issue 47).

The archive is written once, by `neardup precompile` (`record_archive`, in a process of its
own that runs a small scan on Spark and waits for its JVM to exit), into neardup's cache
folder under a name that holds the Java runtime and the Spark release it was made with, so
another JDK or PySpark makes its own. It is written under a temporary name and renamed
when the JVM that wrote it has exited cleanly: HotSpot maps a truncated archive and dies
(SIGBUS), so no run ever names a file that might be one. A run that finds none starts as
before. Only a driver JVM started here takes it: executors on a cluster, spark-submit's
driver and a driver given its own `spark.driver.extraJavaOptions` start as they did, and
a classpath that is not the archive's makes HotSpot ignore it. The archive holds the
classes of a small scan (about 190 MB); `neardup precompile` says where it is.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path
from typing import Any

from neardup.cache_folder import cache_dir

FOLDER = "spark-classes"  # in neardup's cache folder
DRIVER_OPTIONS = "spark.driver.extraJavaOptions"


def java_binary() -> Path | None:
    """The `java` that `spark-submit` starts: `$JAVA_HOME/bin/java`, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path() -> Path | None:
    """Where this Java runtime's and this PySpark's archive goes: a name made of the real
    path, size and time of the `java` binary and PySpark's version and folder. None without
    a cache folder, PySpark or Java."""
    folder, java = cache_dir(), java_binary()
    if folder is None or java is None:
        return None
    try:
        import pyspark
    except ImportError:
        return None
    made = java.stat()
    key = "|".join(
        (
            str(java),
            str(made.st_size),
            str(made.st_mtime_ns),
            pyspark.__version__,
            str(Path(pyspark.__file__).parent),
        )
    )
    return folder / FOLDER / f"classes-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def with_archive(conf: dict[str, str], defaults: dict[str, str]) -> dict[str, str]:
    """The session's settings: `defaults` under the caller's `conf`, the driver JVM told to
    map the archive where one is in place for this runtime (`archive_path`) and the
    caller sets no options of the driver JVM's own."""
    merged = {**defaults, **conf}
    path = archive_path()
    if DRIVER_OPTIONS in conf or path is None or not path.is_file():
        return merged
    options = merged.get(DRIVER_OPTIONS, "")
    return {**merged, DRIVER_OPTIONS: f"{options} -XX:SharedArchiveFile={path}".strip()}


def record_archive(conf: dict[str, str], run: Any) -> Path:
    """Start a local session from `conf` whose driver JVM writes the archive of the classes
    it loads, call `run(session)`, stop the JVM and wait for it, and put the archive in
    place. Call it in a process that has no session yet: the JVM is this process's."""
    from pyspark import SparkContext

    from neardup.pipeline.executors.spark.session import spark_session

    final = archive_path()
    if final is None:
        raise RuntimeError("no Java, PySpark or cache folder: no archive to write")
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.{os.getpid()}.tmp")
    options = f"{conf.get(DRIVER_OPTIONS, '')} -XX:ArchiveClassesAtExit={tmp}".strip()
    try:
        session = spark_session("local[1]", {**conf, DRIVER_OPTIONS: options})
        gateway = SparkContext._gateway
        proc = gateway.proc
        try:
            run(session)
        finally:  # the JVM writes the archive as it exits: wait for it, whatever `run` did
            session.stop()
            gateway.shutdown()
            proc.stdin.close()  # the gateway JVM exits when its stdin closes
            code = proc.wait(timeout=300)
        if code != 0 or not tmp.is_file() or not tmp.stat().st_size:
            raise RuntimeError(f"the JVM exited with {code} and wrote no whole archive")
        tmp.replace(final)
    finally:
        tmp.unlink(missing_ok=True)
    return final
