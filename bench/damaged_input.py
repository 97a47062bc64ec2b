"""Damaged input, case by case: does the scan end, read every intact record, stay small?

Writes one small file (or folder) per case seen in published crawls, runs
`neardup scan CASE --out RUN --force --json -q` on each in a fresh process, and prints a
markdown table: records written intact, pages the scan read, rows in `pages`, the exit status,
whether a traceback was printed, and the peak RSS of the scan (RUSAGE_CHILDREN of a wrapper
process that runs only that scan, so each figure is that scan's own).

    .venv/bin/python bench/damaged_input.py [--bomb-mib 1024]
"""

from __future__ import annotations

import argparse
import ast
import gzip
import json
import os
import random
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))  # the damaged files the tests check

from damaged_warcs import MiB, bomb, gz, lengthen, page, warc_level_bomb  # noqa: E402

_WRAP = (
    "import resource, subprocess, sys\n"
    "r = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
    "peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
    "sys.stdout.write(repr((r.returncode, r.stdout, r.stderr, peak)))\n"
)


def cases(root: Path, bomb_mib: int) -> list[tuple[str, Path, int]]:
    """(case, path, intact records written) for every case, files written under `root`."""
    out: list[tuple[str, Path, int]] = []

    def add(name: str, filename: str, data: bytes, intact: int) -> None:
        path = root / filename
        path.write_bytes(data)
        out.append((name, path, intact))

    seven = [page(i) for i in range(7)]
    add("clean, 7 records (gzip)", "clean.warc.gz", gz(seven), 7)
    bad = [*seven[:2], lengthen(seven[2], 500), *seven[3:]]
    add("Content-Length past its gzip member", "cl_member.warc.gz", gz(bad), 6)
    add("Content-Length past its record (plain)", "cl_plain.warc", b"".join(bad), 6)
    field = b"WARC-Type: response\r\nX-Note: " + b"a" * 40960 + b"\r\n"
    long = seven[1].replace(b"WARC-Type: response\r\n", field, 1)
    add("40 KiB WARC header (plain)", "long_header.warc", b"".join([seven[0], long, *seven[2:]]), 6)
    coded = [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]
    add(
        f"{bomb_mib} MiB gzip bomb in an HTTP body",
        "http_bomb.warc.gz",
        gz([seven[0], page(1, bomb(bomb_mib * MiB), coded), seven[2]]),
        2,
    )
    add(
        f"{bomb_mib} MiB WARC record body",
        "body_bomb.warc.gz",
        gzip.compress(seven[0]) + warc_level_bomb(bomb_mib * MiB) + gzip.compress(seven[2]),
        2,
    )
    rng = random.Random(1)
    members = [bytearray(gzip.compress(r)) for r in seven]
    for _ in range(6):
        members[3][rng.randrange(10, len(members[3]))] = rng.randrange(256)
    add("fuzzed gzip member", "fuzzed.warc.gz", b"".join(bytes(m) for m in members), 6)
    hostile = [
        b'{"url": "http://a/1", "text": "one two", "status": 1e999}',
        b'{"url": "http://a/2", "text": "one two", "status": 1' + b"0" * 30 + b"}",
        b'{"url": "http://a/3", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"url": "http://a/4", "text": "lone \\ud800 surrogate"}',
        b'{"url": "http://a/5", "text": "' + " ".join(f"w{k}" for k in range(50)).encode() + b'"}',
    ]
    name = "JSONL: 1e999, 10^30, 100k-deep nesting, lone surrogate"
    add(name, "rows.jsonl", b"\n".join(hostile), 1)
    location = "http://example.com/" + "x" * 20000
    add(
        "20 KB redirect Location",
        "redirect.warc.gz",
        gz([page(0, b"", [("Location", location)], "301 Moved"), seven[1]]),
        1,
    )
    folder = root / "folder"
    folder.mkdir()
    (folder / "a.warc.gz").write_bytes(gz(seven[:3]))
    (folder / os.fsdecode(b"b\xff.warc.gz")).write_bytes(gz(seven[3:6]))
    (folder / "c.warc.gz").symlink_to(root / "missing")
    os.mkfifo(folder / "d.warc.gz")
    out.append(("folder: non-UTF-8 name, dangling symlink, FIFO", folder, 6))
    return out


def scan(path: Path, run: Path) -> tuple[int, dict, bool, int]:
    """(exit status, JSON summary, traceback printed, peak RSS in MiB) of one scan."""
    cmd = [sys.executable, "-m", "neardup.cli.main", "scan", str(path), "--out", str(run)]
    cmd += ["--force", "--json", "-q"]
    done = subprocess.run([sys.executable, "-c", _WRAP, *cmd], capture_output=True, text=True)
    rc, stdout, stderr, peak = ast.literal_eval(done.stdout)
    try:
        summary = json.loads(stdout)
    except ValueError:
        summary = {}
    return rc, summary, "Traceback" in stdout + stderr, peak // 1024


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bomb-mib", type=int, default=1024)
    args = parser.parse_args(argv)
    rows: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for name, path, intact in cases(root, args.bomb_mib):
            rc, summary, trace, peak = scan(path, root / "run")
            read = summary.get("sketched", "-")
            total = summary.get("records", "-")
            rows.append(
                f"| {name} | {intact} | {read} | {total} | {rc} | {'yes' if trace else 'no'}"
                f" | {peak} |"
            )
    print("| case | intact records | pages read | rows | exit | traceback | peak RSS (MiB) |")
    print("|---|---:|---:|---:|---:|---|---:|")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
