"""The kernels compiled ahead of time against numba's JIT (issue 29), in one window.

1. A scan of a one-record JSONL file, each run a fresh process (`neardup scan one.jsonl`):
   CPU-seconds (user + system, `getrusage` of the child) with the module compiled ahead, with
   `NEARDUP_KERNELS=jit`, and, with `--before SRC`, with another commit's code (a `git
   worktree`'s `src`), the variants alternating run by run.
2. The sketch of 3 M words of text (1,000 texts) ten times on one thread, in a process of
   its own for each: the module compiled ahead (`jit.one_thread`, as a worker runs) against
   the JIT, after one untimed warm-up call each.

    .venv/bin/python bench/kernels_ahead.py --runs 5 [--before /tmp/before/src]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = str(ROOT / ".venv" / "bin" / "python")

_SKETCH = """
import json, random, sys, time
from neardup.config import Settings
from neardup.kernels import jit, sketch_texts
jit.one_thread()
random.seed(1)
words = [f"w{random.randrange(20000)}" for _ in range(3_000_000)]
texts = [" ".join(words[i : i + 3000]) for i in range(0, len(words), 3000)]
settings = Settings()
sketch_texts(texts[:2], settings)
started = time.process_time()
for _ in range(10):
    batch = sketch_texts(texts, settings)
print(json.dumps({"cpu": time.process_time() - started, "jit": jit.started(),
                  "check": int(batch.minhash.astype("int64").sum())}))
"""


def _child_cpu(args: list[str], env: dict[str, str]) -> float:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(args, env=env, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{done.stderr[-2000:]}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def _variants(before: str | None) -> dict[str, dict[str, str]]:
    base = {k: v for k, v in os.environ.items() if k not in ("NEARDUP_KERNELS", "PYTHONPATH")}
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    variants = {"ahead": base, "jit": {**base, "NEARDUP_KERNELS": "jit"}}
    if before:
        variants["before"] = {**base, "PYTHONPATH": before}
    return variants


def one_record(runs: int, before: str | None) -> dict[str, list[float]]:
    return scan_one_record(runs, {name: (PYTHON, env) for name, env in _variants(before).items()})


def scan_one_record(
    runs: int, variants: dict[str, tuple[str, dict[str, str]]]
) -> dict[str, list[float]]:
    """The CPU-seconds of `runs` scans of a one-record file by each interpreter and
    environment of `variants`, alternating, after one untimed round."""
    seen: dict[str, list[float]] = {name: [] for name in variants}
    with tempfile.TemporaryDirectory(prefix="neardup-one-") as work:
        one = Path(work) / "one.jsonl"
        one.write_text(json.dumps({"url": "https://a.example/", "text": "a page of words"}) + "\n")
        for run in range(runs + 1):  # the first round is untimed: caches, bytecode
            for name, (python, env) in variants.items():
                out = Path(work) / f"{name}-{run}"
                args = [python, "-m", "neardup.cli.main", "scan", str(one), "-o", str(out), "-q"]
                cpu = _child_cpu(args, env)
                if run:
                    seen[name].append(cpu)
    return seen


def sketch_speed() -> dict[str, dict[str, float]]:
    out = {}
    for name, env in _variants(None).items():
        done = subprocess.run(
            [PYTHON, "-c", _SKETCH], env=env, capture_output=True, text=True, check=True
        )
        out[name] = json.loads(done.stdout)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--before", help="source folder of another commit's code")
    args = parser.parse_args()
    print(f"load before: {os.getloadavg()[0]:.2f}", file=sys.stderr)
    seen = one_record(args.runs, args.before)
    print("| a one-record scan | CPU-s (user + system), each run | median |")
    print("|---|---|---:|")
    for name, values in seen.items():
        shown = ", ".join(f"{v:.2f}" for v in values)
        print(f"| {name} | {shown} | {statistics.median(values):.2f} |")
    speed = sketch_speed()
    print("\n| 10 sketches of 3 M words on one thread | CPU-s | the JIT started | check |")
    print("|---|---:|---|---|")
    for name, row in speed.items():
        print(f"| {name} | {row['cpu']:.2f} | {row['jit']} | {row['check']} |")
    print(f"load after: {os.getloadavg()[0]:.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
