"""The near and cluster stages' CPU in the scanning process against the tree's (issue 47).

`serial_share.py` gives a whole scan's figures; this bench splits out the two stages after
the sketches, which issue 47 moves onto the workers. It runs `neardup scan INPUTS --workers
N` in a child process with the embedded engine's `near` and `cluster` steps wrapped: each
records the scanning process's own CPU-seconds (all its threads, `time.process_time`) and
the CPU-seconds of its descendants (the forkserver's workers, psutil) at its start and end.
The parent samples the child's whole tree four times a second as `serial_share.py` does
(CPU-seconds of every process, the summed resident memory), so the whole scan's figures and
each stage's peak memory come beside the stages' CPU.

    .venv/bin/python bench/near_stage_cpu.py bench/out/scale/web-1000000.jsonl --workers 2
    PYTHONPATH=/tmp/near-before/src .venv/bin/python bench/near_stage_cpu.py ... # an old commit

Prints one JSON object; appends it to bench/out/near_stage_cpu/results.jsonl.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out" / "near_stage_cpu"


def _descendants_cpu() -> dict[int, float]:
    """User + system seconds of each of this process's descendants alive now."""
    seen: dict[int, float] = {}
    for child in psutil.Process().children(recursive=True):
        try:
            t = child.cpu_times()
            seen[child.pid] = t.user + t.system
        except psutil.Error:
            continue
    return seen


def _descendants_peak_mb() -> list[int]:
    """Each live descendant's peak resident MiB over its life (VmHWM): after a stage whose
    workers started with it, their peaks in the stage."""
    peaks = []
    for child in psutil.Process().children(recursive=True):
        try:
            with open(f"/proc/{child.pid}/status", encoding="ascii") as fh:
                hwm = next(line for line in fh if line.startswith("VmHWM:"))
            peaks.append(round(int(hwm.split()[1]) / 1024))
        except (OSError, StopIteration):
            continue
    return sorted(peaks)


def _spent(before: dict[int, float], after: dict[int, float]) -> float:
    """CPU-seconds the descendants alive at the end spent since `before` (a worker that
    ended in between, idle since its last task, is left out)."""
    return sum(cpu - before.get(pid, 0.0) for pid, cpu in after.items())


def _peaks(series: list, window: list[float] | None = None) -> dict[str, int]:
    """The tree's and the scanning process's peak resident MiB, and the tree's anonymous
    (RssAnon: without the mapped files, such as the signatures, the kernel can drop), within
    `window` if given."""
    inside = [s for s in series if window is None or window[0] <= s[0] <= window[1]]
    return {
        "peak_tree_mb": round(max((s[1] for s in inside), default=0)),
        "peak_scanning_mb": round(max((s[2] for s in inside), default=0)),
        "peak_tree_anon_mb": round(max((s[3] for s in inside), default=0)),
    }


def _child(report: Path, argv: list[str]) -> None:
    """The scan, with its near and cluster steps timed in CPU-seconds (in this process)."""
    from neardup.pipeline.executors import embedded

    figures: dict[str, Any] = {}

    def timed(name: str, step: Any) -> Any:
        def wrapper(self: Any, outcome: Any) -> None:
            own, others, start = time.process_time(), _descendants_cpu(), time.time()
            step(self, outcome)
            own_s = time.process_time() - own
            figures[name] = {
                "own_cpu_s": round(own_s, 3),
                "workers_cpu_s": round(_spent(others, _descendants_cpu()), 3),
                "wall_s": round(time.time() - start, 3),
                "window": [start, time.time()],
                "descendants_peak_mb": _descendants_peak_mb(),
            }

        return wrapper

    embedded.EmbeddedSteps.near = timed("near", embedded.EmbeddedSteps.near)
    embedded.EmbeddedSteps.cluster = timed("cluster", embedded.EmbeddedSteps.cluster)
    from neardup.cli.main import main

    sys.argv = ["neardup", *argv]
    try:
        main()
    except SystemExit as done:
        if done.code:
            raise
    figures["own_total_cpu_s"] = round(time.process_time(), 3)
    report.write_text(json.dumps(figures), encoding="utf-8")


def main() -> None:
    if sys.argv[1:2] == ["--child"]:
        _child(Path(sys.argv[2]), sys.argv[3:])
        return
    # here, not at the top: the child, the scanning process, does not import it
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from scan_against import sample_tree

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("inputs", nargs="+")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=OUT) as scratch:
        report = Path(scratch) / "stages.json"
        scan = ["scan", *args.inputs, "--out", str(Path(scratch) / "run")]
        scan += ["--force", "--quiet", "--workers", str(args.workers)]
        proc = psutil.Popen([sys.executable, __file__, "--child", str(report), *scan])
        stop, seen, peak, series = threading.Event(), {}, [0.0, 0.0], []
        sampler = threading.Thread(
            target=sample_tree, args=(proc, stop, seen, peak), kwargs={"series": series}
        )
        start = time.perf_counter()
        sampler.start()
        proc.wait()
        wall = time.perf_counter() - start
        stop.set()
        sampler.join()
        if proc.returncode:
            raise SystemExit(f"scan failed ({proc.returncode})")
        stages = json.loads(report.read_text(encoding="utf-8"))
    for name in ("near", "cluster"):
        stages[name].update(_peaks(series, stages[name].pop("window")))
    row = {
        "inputs": args.inputs,
        "workers": args.workers,
        "code": os.environ.get("PYTHONPATH", "this checkout"),
        "load_before": round(load, 2),
        "wall_s": round(wall, 2),
        "tree_cpu_s": round(sum(seen.values()), 2),
        "scanning_process_cpu_s": stages.pop("own_total_cpu_s"),
        **_peaks(series),
        **stages,
    }
    with open(OUT / "results.jsonl", "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")
    print(json.dumps(row, indent=1))


if __name__ == "__main__":
    main()
