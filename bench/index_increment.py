"""A 1 % increment from the command line against a re-scan, on either engine (issues 26, 27, 50).

On the web-like corpus of `bench/service_scale.py` (`web-N.jsonl`, made once), as a user
would: the index of all pages but the last 1 % is built by `neardup add` (kept under
bench/out/increment/nN/base, with the commit that built it, and used as that add left it:
behind its last save by the rows written since, which each opening puts in place); then,
`--runs` times, a hard-linked copy of it (segments and graph files are never changed in
place, the manifest is replaced by a rename, so each run starts from the same index), the
opening alone in a fresh interpreter (`neardup.open_index(COPY, read_only=True)`, imports
included) and `neardup add COPY PART...` of the last 1 %, in `--split` files (one, as the
issue's user gives it; Spark runs a task a file), each timed as the plain command (wall and
the command's CPU). Then the re-scan of all N pages, the one corpus file by default (as the
user scans it; `--shards` splits it), on the same engine, and the index after the increment
against it (REP, RER: same-group pairs only one side has). The ratio is the re-scan's wall
time over the increments' median wall time (`rescan_over_median`), the CPU ratio beside it.

    .venv/bin/python bench/index_increment.py --pages 1000000 --runs 7
    .venv/bin/python bench/index_increment.py --pages 1000000 --engine spark \
        --master 'local[2]' --split 2
    .venv/bin/python bench/index_increment.py --pages 1000000 --engine spark \
        --master spark://127.0.0.1:7077 --spark-conf spark.executor.memory=3g --split 2

(the last on a standalone master with two one-core workers, `bench/standalone_cluster.sh`).
With `--behind N`, the increments go into a copy of the base to which N of its pages were
first sent again, rewritten, by the code measured (its last save that far behind: what a
writer leaves to the next opening, replayed or not, is in the runs).

Until issue 50 the base was made once and kept whatever code came after, and an index saved
by an older neardup was saved again before the runs: the increments went into an index with
nothing written since its save, the best case, where the add of 99 % leaves tens of
thousands of rows after its last save (30,000 at a million pages) for every opening to put
in place. The base is now rebuilt when another commit built it (`--keep-base` keeps it), and
its rows since the save are in the results (`base_rows_since_save`).

Take it on a quiet machine: the load average before each step is in the results
(bench/out/increment/results.json, one row a run, appended) and the table printed.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from index_memory import linked_copy  # noqa: E402 - the bench folder, not a package
from service_scale import corpus, parity  # noqa: E402

OUT = BENCH / "out" / "increment"
NEARDUP = BENCH.parent / ".venv" / "bin" / "neardup"


def split_lines(
    src: Path, dest: Path, first: int, parts: int, last: int | None = None
) -> list[Path]:
    """Lines `first` .. `last`-1 of `src` (to its end without `last`) into `parts` files
    under `dest`, in order, streamed."""
    with open(src, "rb") as f:
        total = sum(1 for _ in f) if last is None else last
    size = -(-(total - first) // parts)
    dest.mkdir(parents=True, exist_ok=True)
    out = [dest / f"part-{i:02d}.jsonl" for i in range(parts)]
    files = [open(p, "wb") for p in out]  # noqa: SIM115 - closed below
    try:
        with open(src, "rb") as f:
            for n, line in enumerate(f):
                if n >= total:
                    break
                if n >= first:
                    files[(n - first) // size].write(line)
    finally:
        for handle in files:
            handle.close()
    return out


def timed(cmd: list[str], log: Path) -> dict[str, float]:
    """Run `cmd` (its output to `log`); its wall time and its CPU (user + system of it and
    the children it waited for), and the load average before it."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    with open(log, "ab") as out:
        done = subprocess.run(cmd, stdout=out, stderr=out, check=False)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed ({done.returncode}); see {log}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "load_before": round(load, 2)}


OPEN = "import sys, neardup; neardup.open_index(sys.argv[1], read_only=True)"


def commit() -> str:
    """The commit of the code measured (with `+` when the working tree differs from it)."""
    git = ["git", "-C", str(BENCH.parent)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", "src"], check=False)
    return head.stdout.strip() + ("+" if dirty.returncode else "")


def rows_since_save(store: Path) -> int:
    """The page rows an opening of `store` puts in place after its save (its segments')."""
    manifest = json.loads((store / "manifest.json").read_text())
    return int(sum(manifest.get("rows", [])))


def engine_args(engine: str, master: str | None, conf: list[str]) -> list[str]:
    if engine == "embedded":
        return []
    args = ["--engine", "spark", "--spark-master", master or "local[2]"]
    return [*args, *(a for c in ["spark.driver.memory=4g", *conf] for a in ("--spark-conf", c))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--share", type=float, default=0.01, help="the increment's share")
    parser.add_argument("--engine", choices=["embedded", "spark"], default="embedded")
    parser.add_argument("--master", help="Spark master (default local[2])")
    parser.add_argument("--spark-conf", action="append", default=[], help="KEY=VALUE")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--split", type=int, default=1, help="files of the increment")
    parser.add_argument(
        "--shards", type=int, default=1, help="files the re-scan reads (1: the corpus file)"
    )
    parser.add_argument(
        "--keep-base",
        action="store_true",
        help="use the base index even where another commit built it",
    )
    parser.add_argument("--no-rescan", action="store_true", help="the increments only")
    parser.add_argument(
        "--behind",
        type=int,
        default=0,
        help="first send this many of the base's pages again, rewritten (rewrite_increment.py),"
        " to a copy of the base, by this code: the increments then go into an index whose"
        " last save is that far behind",
    )
    args = parser.parse_args()

    pages = corpus(args.pages)
    folder = OUT / f"n{args.pages}"
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "commands.log"
    keep = args.pages - round(args.pages * args.share)
    base = folder / "base"
    info = folder / "base-info.json"
    built = json.loads(info.read_text()) if info.exists() else {}
    if built.get("commit") != commit() and not args.keep_base:
        shutil.rmtree(base, ignore_errors=True)  # another code's index is no user's
    if not (base / "manifest.json").exists():  # the index of all but the increment
        shutil.rmtree(base, ignore_errors=True)
        first = split_lines(pages, folder / "base-input", 0, 1, last=keep)[0]
        print("building the base index ...", file=sys.stderr)
        built = {"commit": commit(), **timed([str(NEARDUP), "add", str(base), str(first)], log)}
        info.write_text(json.dumps(built) + "\n", encoding="utf-8")
        first.unlink()
    if args.behind:  # made again each time: what is left behind depends on the code
        mix = folder / f"behind-{args.behind}.jsonl"
        maker = Path(__file__).resolve().parent / "rewrite_increment.py"
        cmd = [sys.executable, str(maker), str(pages), str(mix), "--pages", str(args.behind)]
        subprocess.run([*cmd, "--among", str(keep), "--seed", "11"], check=True)
        behind = linked_copy(base, folder / "base-behind")
        timed([str(NEARDUP), "add", str(behind), str(mix), "--json"], log)
        base = behind
    parts = split_lines(pages, folder / "increment", keep, args.split)
    extra = engine_args(args.engine, args.master, args.spark_conf)
    runs = []
    copy = folder / "copy"
    python = str(NEARDUP.parent / "python")
    for _ in range(args.runs):
        linked_copy(base, copy)
        opened = timed([python, "-c", OPEN, str(copy)], log)
        cmd = [str(NEARDUP), "add", str(copy), *map(str, parts), "--json", *extra]
        runs.append({**timed(cmd, log), "open": opened})
        print(json.dumps(runs[-1]), file=sys.stderr)
    walls = [r["wall_s"] for r in runs]
    result: dict[str, object] = {
        "pages": args.pages,
        "increment": args.pages - keep,
        "engine": args.engine,
        "master": args.master if args.engine == "spark" else None,
        "runs": runs,
        "median_s": statistics.median(walls),
        "median_cpu_s": statistics.median(r["cpu_s"] for r in runs),
        "open_median_s": statistics.median(r["open"]["wall_s"] for r in runs),
        "behind": args.behind,
        "split": args.split,
        "commit": commit(),
        "base_commit": built.get("commit"),
        "base_rows_since_save": rows_since_save(base),
    }
    if not args.no_rescan:
        shards = [pages]
        if args.shards > 1:
            shards = split_lines(pages, folder / "shards", 0, args.shards)
        rescan = folder / f"rescan-{args.engine}"
        shutil.rmtree(rescan, ignore_errors=True)
        os.sync()
        time.sleep(5)
        cmd = [str(NEARDUP), "scan", *map(str, shards), "--out", str(rescan), "--json", *extra]
        again = timed(cmd, log)
        result["rescan"] = {**again, "shards": args.shards}
        result["rescan_over_median"] = round(again["wall_s"] / statistics.median(walls), 1)
        cpu = statistics.median(r["cpu_s"] for r in runs)
        result["rescan_cpu_over_median_cpu"] = round(again["cpu_s"] / cpu, 1)
        result["parity"] = parity(copy, rescan)
    results_file = OUT / "results.json"
    rows = json.loads(results_file.read_text()) if results_file.exists() else []
    rows.append(result)
    results_file.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
