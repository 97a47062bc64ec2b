"""Commands run in a fresh interpreter, as a user runs them.

The CLI imports only the command group a command line names, so a module that used a
submodule another group happened to import (`pyarrow.compute` through `pa.compute`) works in
a test process that has imported everything, and fails for the user. These tests start a new
Python for each command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def pages(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fresh")
    base = " ".join(f"word{i} of the page" for i in range(60))
    path = folder / "pages.jsonl"
    with path.open("w", encoding="utf-8") as f:
        for i in range(12):
            text = base if i % 4 == 0 else " ".join(f"w{i}x{j}" for j in range(200))
            f.write(json.dumps({"url": f"https://h{i % 3}.example/{i}", "text": text}) + "\n")
    return path


def _neardup(*args: str, **env: str) -> subprocess.CompletedProcess:
    """`neardup ARGS` through the console entry point in a fresh Python, with `env` added
    to this process's environment."""
    return subprocess.run(
        [sys.executable, "-m", "neardup.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env} if env else None,
    )


def test_scan_then_dedup_of_its_run_each_in_a_fresh_interpreter(pages, tmp_path):
    run, clean = tmp_path / "run", tmp_path / "clean"
    done = _neardup("scan", str(pages), "--out", str(run), "--workers", "1", "--json", "-q")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["records"] == 12
    # dedup of a finished run scans nothing: it imports only what dedup itself needs
    done = _neardup("dedup", "--run", str(run), "--out", str(clean), "--json", "-q")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)
    assert (clean / "kept.parquet").exists() and (clean / "removed.parquet").exists()


def test_dedup_that_scans_in_a_fresh_interpreter(pages, tmp_path):
    out = tmp_path / "clean"
    done = _neardup("dedup", str(pages), "--out", str(out), "--workers", "1", "--json", "-q")
    assert done.returncode == 0, done.stderr
    assert (out / "kept.parquet").exists()


def _loaded_modules(importtime_report: str) -> list[str]:
    """The modules a process (and its children) imported, from PYTHONPROFILEIMPORTTIME's
    report on stderr."""
    return [ln.rsplit("|", 1)[-1].strip() for ln in importtime_report.splitlines() if "|" in ln]


# Every Python process of a command reports its imports on stderr (its workers inherit it).
IMPORT_REPORT = {"PYTHONPROFILEIMPORTTIME": "1"}
# numba's probe of a BLAS: tried and refused, so reported by name with nothing under it
_PROBES = ("scipy.linalg", "scipy.linalg.cython_blas")


def _probed_ones_loaded(imported: list[str]) -> list[str]:
    """The modules of pandas and scipy that `imported` holds beyond a refused probe."""
    loaded = [m for m in imported if m.startswith(("pandas.", "scipy.")) and m not in _PROBES]
    return sorted(set(loaded))[:20]


def test_a_scan_and_its_workers_go_without_the_modules_only_probed_for(pages, tmp_path):
    """`neardup scan` on the embedded engine loads neither pandas nor scipy, in its own
    process or in its workers (`neardup.startup`): pyarrow and numba import them only to see
    whether they are there. Every Python process of the command reports its imports
    (PYTHONPROFILEIMPORTTIME, which the workers inherit); a blocked probe shows as its top
    name alone, a loaded module with its submodules."""
    import shutil

    inputs = []
    for i in range(4):  # several files: the stages run in the workers
        inputs.append(tmp_path / f"part{i}.jsonl")
        shutil.copy(pages, inputs[-1])
    # on the JIT (as a large scan's workers are), so that numba's own probe is tried too
    args = ["scan", *map(str, inputs), "--out", str(tmp_path / "run"), "--workers", "2"]
    done = _neardup(*args, "--json", "-q", **IMPORT_REPORT, NEARDUP_KERNELS="jit")
    assert done.returncode == 0, done.stderr[-3000:]
    imported = _loaded_modules(done.stderr)
    assert "numba" in imported and "pyarrow" in imported  # the report covers the command
    assert json.loads(done.stdout)["records"] == 48
    assert imported.count("neardup.kernels") >= 3  # this process and both workers
    assert _probed_ones_loaded(imported) == []


_THREADS_AFTER_NUMPY = """
import os, sys
from neardup import startup
if sys.argv[1] == "one":
    startup.one_blas_thread()
import numpy
print(len(os.listdir("/proc/self/task")))
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_one_blas_thread_keeps_numpy_from_starting_a_thread_per_core():
    """`startup.one_blas_thread` before numpy loads leaves the process one thread; without
    it OpenBLAS starts one for each core (where there are several), whose spinning cost
    every process of a command about 0.1 CPU-s."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}

    def threads(mode: str) -> int:
        done = subprocess.run(
            [sys.executable, "-c", _THREADS_AFTER_NUMPY, mode],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            check=True,
        )
        return int(done.stdout)

    assert threads("one") == 1
    if len(os.sched_getaffinity(0)) > 1:
        assert threads("default") > 1


_ENTRY_WITH_REPORT = """
import atexit, os, sys
atexit.register(lambda: print(os.environ.get("OPENBLAS_NUM_THREADS"), file=sys.stderr))
from neardup.cli.main import main
assert "numpy" not in sys.modules  # loaded by the command, after the entry point's start
sys.argv = ["neardup", *sys.argv[1:]]
main()
"""


def test_the_console_entry_point_asks_for_one_blas_thread_before_numpy_loads(pages, tmp_path):
    """Every command's process (and so its workers, which inherit the environment) runs
    with one BLAS thread, set before the command imports numpy; a user's own value stays."""
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    for users, expected in ((None, "1"), ("2", "2")):
        if users is not None:
            env["OPENBLAS_NUM_THREADS"] = users
        out = tmp_path / f"run-{expected}"
        done = subprocess.run(
            [sys.executable, "-c", _ENTRY_WITH_REPORT, "scan", str(pages), "--out", str(out), "-q"],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert done.stderr.strip().splitlines()[-1] == expected


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """A small demo crawl (request-first WARCs with mirrors and collections) and its run."""
    folder = tmp_path_factory.mktemp("demo")
    done = _neardup("demo-crawl", str(folder / "crawl"), "--pages", "40", "--force")
    assert done.returncode == 0, done.stderr[-3000:]
    warcs = sorted(str(p) for p in (folder / "crawl" / "warc").glob("*.warc.gz"))
    done = _neardup("scan", *warcs, "--out", str(folder / "run"), "--workers", "1", "-q")
    assert done.returncode == 0, done.stderr[-3000:]
    return folder, warcs


def test_every_embedded_command_goes_without_the_modules_only_probed_for(demo_run, tmp_path):
    """Not only the scan: every command that reads a run, a store of crawls or an index
    makes Arrow arrays, and pyarrow's first array imports pandas to see whether it is one
    (0.3 CPU-s of `neardup mirrors` on a small run). Each command here runs through the
    console entry point in a fresh Python, succeeds, and loads neither pandas nor scipy."""
    folder, warcs = demo_run
    run, store, index = folder / "run", tmp_path / "store", tmp_path / "index"
    urls = tmp_path / "urls.txt"
    urls.write_text("https://www.example.com/\n")
    lines = [
        ["summary", str(run)],
        ["clusters", str(run), "--top", "3"],
        ["mirrors", str(run)],
        ["collections", str(run)],
        ["avoid-list", str(run)],
        ["rollup", str(run), str(urls)],
        ["report", str(run), "-o", str(tmp_path / "report.html")],
        ["dedup", "--run", str(run), "--out", str(tmp_path / "clean")],
        ["crawl", warcs[0], "--store", str(store), "--label", "a", "--workers", "1"],
        ["crawl", *warcs[1:], "--store", str(store), "--label", "b", "--workers", "1"],
        ["evolution", str(store)],
        ["find-moved", "--store", str(store), "--all"],
        ["add", str(index), *warcs],
        ["--version"],
    ]
    for line in lines:
        done = _neardup(*line, **IMPORT_REPORT)
        assert done.returncode == 0, (line, done.stderr[-3000:])
        imported = _loaded_modules(done.stderr)
        assert "pyarrow" in imported or line == ["--version"], line  # the report covers it
        assert _probed_ones_loaded(imported) == [], line


def _served_pages(
    line: list[str], port: int, paths: list[str], report: Path
) -> tuple[dict[str, int], str]:
    """Start a server command through the console entry point in a fresh Python, ask it for
    `paths`, stop it; return each path's status and the process's importtime report (kept
    in the file `report`: a pipe would fill and stop the server)."""
    import time

    import httpx

    env = {**os.environ, **IMPORT_REPORT}
    statuses: dict[str, int] = {}
    with report.open("w") as err:
        server = subprocess.Popen(
            [sys.executable, "-m", "neardup.cli.main", *line, "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
        try:
            deadline = time.monotonic() + 60
            while not statuses and time.monotonic() < deadline and server.poll() is None:
                try:
                    url = f"http://127.0.0.1:{port}{paths[0]}"
                    statuses[paths[0]] = httpx.get(url).status_code
                except httpx.TransportError:
                    time.sleep(0.2)
            for path in paths[1:] if statuses else []:
                statuses[path] = httpx.get(f"http://127.0.0.1:{port}{path}").status_code
        finally:
            server.terminate()
            server.wait(timeout=30)
    return statuses, report.read_text()


def test_the_servers_go_without_the_modules_only_probed_for(demo_run, tmp_path):
    """`neardup ui` and `neardup serve`, started as a user starts them, answer their pages
    and load neither pandas nor scipy (the UI's views read the run through Arrow)."""
    from door_server import free_port

    folder, warcs = demo_run
    done = _neardup("add", str(tmp_path / "index"), *warcs)
    assert done.returncode == 0, done.stderr[-3000:]
    servers = [
        (["ui", str(folder / "run")], ["/", "/mirrors", "/collections", "/search?q=example"]),
        (["serve", str(tmp_path / "index")], ["/", "/api/docs"]),
    ]
    for line, paths in servers:
        statuses, report = _served_pages(line, free_port(), paths, tmp_path / f"{line[0]}.err")
        assert statuses == dict.fromkeys(paths, 200), (line, statuses, report[-3000:])
        imported = _loaded_modules(report)
        assert "pyarrow" in imported, line
        assert _probed_ones_loaded(imported) == [], line
