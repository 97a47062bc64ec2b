"""The Spark driver JVM starts from a class archive written once (`spark/jvm_archive.py`).

The archive's name follows the Java runtime and PySpark it was made with; a session takes it
only where it is in place and the caller gives the driver JVM no options of its own; and a
JVM started by neardup after `python -m neardup.cli.spark_classes` loads its classes from
it, which the JVM's own class-loading log says (not the options asked for)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from spark_session import spark  # noqa: F401 - the fixture

from neardup.pipeline.executors.spark import jvm_archive
from neardup.pipeline.executors.spark.jvm_archive import (
    DRIVER_OPTIONS,
    archive_path,
    with_archive,
)

pytest.importorskip("pyspark")


def _fake_java(folder: Path, body: str) -> Path:
    java = folder / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(body)
    return folder


def test_the_archive_is_named_by_the_java_runtime(tmp_path, monkeypatch):
    monkeypatch.setenv("NEARDUP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk-a", "a")))
    first = archive_path()
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk-b", "another")))
    second = archive_path()
    assert first is not None and second is not None
    assert first.parent == second.parent == tmp_path / "cache" / jvm_archive.FOLDER
    assert first != second
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    monkeypatch.setattr(jvm_archive.shutil, "which", lambda name: None)
    assert archive_path() is None  # no Java: no archive to name


def test_a_session_takes_the_archive_only_where_it_is_and_the_driver_has_no_options(
    tmp_path, monkeypatch
):
    monkeypatch.setenv("NEARDUP_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("JAVA_HOME", str(_fake_java(tmp_path / "jdk", "java")))
    defaults = {DRIVER_OPTIONS: "-XX:TieredStopAtLevel=1", "spark.ui.enabled": "false"}
    assert with_archive({}, defaults) == defaults  # none written yet
    path = archive_path()
    assert path is not None
    path.parent.mkdir(parents=True)
    path.write_bytes(b"archive")
    taken = with_archive({"spark.ui.enabled": "true"}, defaults)
    assert taken[DRIVER_OPTIONS] == f"-XX:TieredStopAtLevel=1 -XX:SharedArchiveFile={path}"
    assert taken["spark.ui.enabled"] == "true"  # the caller's settings win
    own = {DRIVER_OPTIONS: "-Xss4m"}
    assert with_archive(own, defaults)[DRIVER_OPTIONS] == "-Xss4m"


def test_a_driver_jvm_loads_its_classes_from_the_archive_written(spark, tmp_path):  # noqa: F811
    """The `spark` fixture is asked for its rule: where Spark cannot start, skipped off CI
    and a failure on it. The archive is written into a cache folder of the test's own."""
    env = {**os.environ, "NEARDUP_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    written = subprocess.run(
        [sys.executable, "-m", "neardup.cli.spark_classes"],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert written.returncode == 0, written.stderr[-3000:]
    archive = Path(written.stdout.strip().splitlines()[-1])
    assert archive.is_file() and archive.parent == tmp_path / "cache" / jvm_archive.FOLDER
    assert not list(archive.parent.glob(".*.tmp"))  # renamed into place, nothing left over
    log = tmp_path / "classes.log"
    script = (
        "from neardup.pipeline.executors.spark.session import spark_session\n"
        "s = spark_session('local[1]')\n"
        "assert s.range(100).count() == 100\n"
        "s.stop()\n"
    )
    env["JAVA_TOOL_OPTIONS"] = f"-Xlog:class+load=info:file={log}"
    started = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, env=env
    )
    assert started.returncode == 0, started.stderr[-3000:]
    lines = log.read_text().splitlines()
    from_archive = sum("shared objects file (top)" in line for line in lines)
    from_jars = sum("source: jar:" in line or "source: file:" in line for line in lines)
    assert from_archive > 5000 and from_archive > 5 * from_jars
