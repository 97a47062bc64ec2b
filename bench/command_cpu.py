"""What the commands that read a run cost on a small one, start-up included (issue 29).

A demo crawl (`neardup demo-crawl --pages N`) is scanned once; then each command below runs
in a fresh process through the console entry point, with this checkout's code and with
another commit's (`--before SRC`, a `git worktree`'s `src`; `--before-python` for another
virtual environment's interpreter), alternating run by run after one untimed round. Each
figure is the child's CPU-seconds (user + system): on a run this small, nearly all of it is
what the command loads before it starts and what its libraries probe for.

    .venv/bin/python bench/command_cpu.py --runs 5 --before /tmp/before/src
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kernels_ahead import PYTHON, _child_cpu
from one_record import sides


def _commands(run: Path, work: Path) -> dict[str, list[str]]:
    return {
        "--version": ["--version"],
        "summary": ["summary", str(run)],
        "clusters": ["clusters", str(run), "--top", "5"],
        "mirrors": ["mirrors", str(run)],
        "collections": ["collections", str(run)],
        "avoid-list": ["avoid-list", str(run)],
        "report": ["report", str(run), "-o", str(work / "report.html"), "--force"],
    }


def measure(
    runs: int, pages: int, before: str | None, before_python: str | None
) -> dict[str, dict[str, list[float]]]:
    variants = sides(before, before_python)
    seen: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="neardup-commands-") as tmp:
        work = Path(tmp)
        entry = [PYTHON, "-m", "neardup.cli.main"]
        crawl = [*entry, "demo-crawl", str(work / "crawl"), "--pages", str(pages)]
        subprocess.run(crawl, check=True, stdout=subprocess.DEVNULL)
        warcs = sorted(str(p) for p in (work / "crawl" / "warc").glob("*.warc.gz"))
        scan = [*entry, "scan", *warcs, "-o", str(work / "run"), "-q"]
        subprocess.run(scan, check=True, stdout=subprocess.DEVNULL)
        commands = _commands(work / "run", work)
        for run in range(runs + 1):  # the first round is untimed: caches, bytecode
            for command, line in commands.items():
                for name, (python, env) in variants.items():
                    cpu = _child_cpu([python, "-m", "neardup.cli.main", *line], env)
                    if run:
                        seen.setdefault(command, {}).setdefault(name, []).append(cpu)
    return seen


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--pages", type=int, default=250, help="the demo crawl's primary site")
    parser.add_argument("--before", help="source folder of another commit's code")
    parser.add_argument("--before-python", help="the interpreter of another virtual environment")
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.2f}")
    seen = measure(args.runs, args.pages, args.before, args.before_python)
    names = list(next(iter(seen.values())))
    print("\n| command | " + " | ".join(f"{n}, CPU-s median (range)" for n in names) + " |")
    print("|---|" + "---:|" * len(names))
    for command, by_name in seen.items():
        cells = [
            f"{statistics.median(v):.2f} ({min(v):.2f}-{max(v):.2f})" for v in by_name.values()
        ]
        print(f"| `{command}` | " + " | ".join(cells) + " |")
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
