"""The index at scale, every figure issue 49 asks for (its item 5), on one engine and size.

    PYTHONPATH=CHECKOUT/src .venv/bin/python bench/index_at_scale.py --pages 1000000
    PYTHONPATH=CHECKOUT/src .venv/bin/python bench/index_at_scale.py --pages 1000000 \
        --engine spark --master 'local[2]'

With `--base STORE`, the index of N pages is STORE as it is (built by another commit, or by
`neardup add` of the shards run by hand: a 4 M or 10 M build takes half an hour or more).

The pages are the web-like corpus's shards (bench/out/scale/shards/web-K-(K+1)000000.jsonl,
a million pages each, numbered on; `--pages 100000` takes the first shard's first lines).
The index of N pages is pages 0 .. N-1 added by `neardup add` (`--base-engine`, by default
the engine measured), built once per commit under bench/out/index_at_scale/bases/ and used
as that add left it (behind its last save by the rows written since). Then, on hard-linked
copies of it (saved files are never changed in place; the manifest is replaced by a rename):

1. `neardup add COPY ...` of a 1 % increment (pages N .. N + N/100 - 1), `--runs` times, and
   of an eighth (pages N .. N + M - 1, M the least count past N/8 that makes the save rule
   fire, `FoldRule(4096, 8)`: rows since the save x 8 > pages after the batch), `--eighth-runs`
   times. Each add runs as the command does (`cli.main`) in a child process that also wraps
   `ServiceIndex._save_graph_now` and `_save_changes_now`: for each save, its seconds and
   this process's own `/proc/self/io` write_bytes (what it sent to storage itself, not its
   children, the JVM or the executors; wchar beside it). This process samples the child's
   `/proc/PID/status` every 20 ms (peak anonymous and file-mapped resident memory) and the
   child reports its own VmHWM and its memory as it ends (as bench/index_memory.py does);
   on Spark the child is the driver's Python process. Wall and CPU (the child's and the
   children it waited for: not Spark's JVM, which it does not wait for) as
   bench/index_increment.py times them; pages a second. The eighth's new `graph-N/`
   folder: its size, and the bytes of its files not linked from the save before.
2. Opening (`neardup.open_index(COPY, read_only=True)`) in a fresh interpreter, the imports
   timed apart: the base as the add left it, and the index after the eighth (just saved).
3. `neardup serve` on the index after a 1 % increment: `POST /check` of new pages' texts,
   one client thread (latency) and four (throughput): queries a second, p50 and p99.
4. The Spark re-scan (`--rescan-master`, default local[2]) of the same pages as the 1 %
   increment's index (base and increment files), once per size and commit, its wall and
   CPU against the increment's medians; parity of the index after the increment with it
   (REP, RER).

Every figure has the 1-minute load average before it. Rows are appended to
bench/out/index_at_scale/results.jsonl (one JSON line per measurement, and a summary line)
and a Markdown table printed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from index_increment import engine_args, rows_since_save, split_lines  # noqa: E402
from index_memory import PYTHON, REPORT_AT_EXIT, STATUS_FIELDS, linked_copy  # noqa: E402
from service_scale import free_port, parity  # noqa: E402

OUT = BENCH / "out" / "index_at_scale"
SHARDS = BENCH / "out" / "scale" / "shards"
SHARD = 1_000_000
SAVE_AT_LEAST, SAVE_SHARE = 4096, 8  # service_index.GRAPH_EVERY_PAGES / _SHARE (a9852e9)

# `neardup add ...` as the command line runs it (cli.main), with each save of the index
# timed and its bytes written by this process counted; the process's memory and I/O figures
# written, as it ends, to the file named by the first argument (its saves to FILE.saves).
_CHILD = (
    r"""
import json, os, sys, time
out = sys.argv[1]
sys.argv = ["neardup", *sys.argv[2:]]
import neardup.cli.main as cli
from neardup.startup import one_blas_thread, without_probed_modules
# what cli.main does first, before the index's modules load here
one_blas_thread()
os.environ.setdefault("ARROW_DEFAULT_MEMORY_POOL", "system")
if not cli._on_spark(sys.argv[2:]):
    without_probed_modules()


def io():
    got = {}
    for line in open("/proc/self/io"):
        key, _, value = line.partition(":")
        got[key] = int(value)
    return got


from neardup.index import service_index


def hooked(name):
    real = getattr(service_index.ServiceIndex, name)

    def run(self, *args, **kwargs):
        before, c0, t0 = io(), os.times(), time.perf_counter()
        real(self, *args, **kwargs)
        after, c1, t1 = io(), os.times(), time.perf_counter()
        row = {
            "kind": name.strip("_"),
            "s": round(t1 - t0, 3),
            "cpu_s": round(c1.user + c1.system - c0.user - c0.system, 3),
            "write_bytes": after["write_bytes"] - before["write_bytes"],
            "cancelled_write_bytes": after["cancelled_write_bytes"]
            - before["cancelled_write_bytes"],
            "wchar": after["wchar"] - before["wchar"],
            "pages": int(self.pages.n),
            "graph": (self.graph_meta or {}).get("name"),
        }
        with open(out + ".saves", "a") as fh:
            fh.write(json.dumps(row) + "\n")

    setattr(service_index.ServiceIndex, name, run)


hooked("_save_graph_now")
hooked("_save_changes_now")


"""
    + STATUS_FIELDS
    + r"""

def report():
    fields = status_fields()
    fields["io"] = io()
    open(out, "w").write(json.dumps(fields))
"""
    + REPORT_AT_EXIT
)

OPEN = r"""
import json, sys, time
t0 = time.perf_counter()
import neardup, neardup.index.handle, neardup.index.service_index  # the modules, apart
t1 = time.perf_counter()
ix = neardup.open_index(sys.argv[1], read_only=True)
t2 = time.perf_counter()
rss = int(open("/proc/self/statm").read().split()[1]) * 4096
counts = ix.counts()  # a record since issue 48, a dict before
pages = counts["pages"] if isinstance(counts, dict) else counts.pages
print(json.dumps({"import_s": round(t1 - t0, 3), "open_s": round(t2 - t1, 3),
                  "rss_mib": rss >> 20, "index_pages": pages}))
"""

CHECKS = r"""
import json, sys, time, httpx, numpy as np
from concurrent.futures import ThreadPoolExecutor
port, n, threads, texts = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
texts = json.load(open(texts))
client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=120,
                      limits=httpx.Limits(max_connections=16))
client.post("/check", json={"text": texts[0]}).raise_for_status()  # warm
def one(i):
    t = time.perf_counter()
    r = client.post("/check", json={"text": texts[i % len(texts)]})
    r.raise_for_status()
    return (time.perf_counter() - t) * 1000, r.json()["is_duplicate"]
t0 = time.perf_counter()
with ThreadPoolExecutor(threads) as pool:
    got = list(pool.map(one, range(n)))
wall = time.perf_counter() - t0
lat = np.array([ms for ms, _ in got])
print(json.dumps({"threads": threads, "queries": n, "qps": round(n / wall, 1),
                  "p50_ms": round(float(np.percentile(lat, 50)), 2),
                  "p99_ms": round(float(np.percentile(lat, 99)), 2),
                  "matched": sum(m for _, m in got)}))
"""


def load() -> float:
    return round(os.getloadavg()[0], 2)


def measured_commit(env: dict[str, str]) -> str:
    """The commit of the `neardup` this bench's children import (PYTHONPATH), `+` when its
    src differs from it."""
    code = "import neardup; print(neardup.__file__)"
    where = subprocess.run([str(PYTHON), "-c", code], env=env, capture_output=True, text=True)
    src = Path(where.stdout.strip()).parent.parent
    git = ["git", "-C", str(src)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run([*git, "diff", "--quiet", "HEAD", "--", "."], check=False)
    return head.stdout.strip() + ("+" if dirty.returncode else "")


def pages_file(first: int, count: int, parts: int = 1) -> list[Path]:
    """Pages first .. first + count - 1 of the sharded corpus as `parts` files (a whole
    shard is the shard itself)."""
    shard = first // SHARD
    src = SHARDS / f"web-{shard * SHARD}-{(shard + 1) * SHARD}.jsonl"
    if not (SHARDS / f"web-{shard * SHARD}-{(shard + 1) * SHARD}.done").exists():
        raise SystemExit(f"{src} is not written yet")
    if first % SHARD + count > SHARD:
        if first % SHARD == 0 and count % SHARD == 0 and parts == 1:
            return [p for k in range(count // SHARD) for p in pages_file(first + k * SHARD, SHARD)]
        raise SystemExit("a range of pages across shards: whole shards only")
    if first % SHARD == 0 and count == SHARD and parts == 1:
        return [src]
    dest = OUT / "inputs" / f"pages-{first}-{count}-{parts}"
    done = dest / "done"
    if not done.exists():
        shutil.rmtree(dest, ignore_errors=True)
        split_lines(src, dest, first % SHARD, parts, last=first % SHARD + count)
        done.write_text("ok\n")
    return sorted(dest.glob("part-*.jsonl"))


def lines(path: Path) -> int:
    with open(path, "rb") as fh:
        return sum(1 for _ in fh)


class TreeCpu:
    """The CPU seconds of a process and every process under it (Spark's JVM and Python
    workers, which the command does not wait for), from /proc every 0.2 s: each process's
    last user + system seconds seen, and those of the children it reaped."""

    def __init__(self, root: int) -> None:
        self.root, self.seen, self.stop = root, {}, threading.Event()
        self.tick = os.sysconf("SC_CLK_TCK")
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        parent, cpu = {}, {}
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            try:
                stat = Path(f"/proc/{entry.name}/stat").read_text()
            except OSError:
                continue
            f = stat.rpartition(")")[2].split()
            pid = int(entry.name)
            parent[pid] = int(f[1])
            cpu[pid] = (int(f[11]) + int(f[12]) + int(f[13]) + int(f[14])) / self.tick
        tree, grew = {self.root}, True
        while grew:
            more = {p for p, pp in parent.items() if pp in tree} - tree
            tree |= more
            grew = bool(more)
        for pid in tree & cpu.keys():
            self.seen[pid] = max(self.seen.get(pid, 0.0), cpu[pid])

    def _run(self) -> None:
        while not self.stop.wait(0.2):
            self._sample()

    def done(self) -> float:
        self.stop.set()
        self.thread.join()
        return round(sum(self.seen.values()), 2)


def tree_timed(cmd: list[str], env: dict, log: Path) -> dict:
    """`cmd`'s wall time and the CPU of its whole process tree (`TreeCpu`), and the load
    before it."""
    before = load()
    t0 = time.perf_counter()
    with open(log, "ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=out)
    tree = TreeCpu(proc.pid)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    cpu = tree.done()
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"{' '.join(cmd)} failed; see {log}")
    own = round(usage.ru_utime + usage.ru_stime, 2)
    return {
        "wall_s": round(wall, 3),
        "cpu_s": own,
        "tree_cpu_s": max(cpu, own),
        "load_before": before,
    }


def proc_fields(pid: int) -> dict[str, int]:
    got = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon", "RssFile"):
            got[key] = int(value.split()[0])
    return got


def add(store: Path, files: list[Path], extra: list[str], env: dict, log: Path) -> dict:
    """`neardup add STORE FILES --json EXTRA` in the measuring child; its figures."""
    report = OUT / f"child-report-{os.getpid()}"
    for f in (report, Path(f"{report}.saves")):
        f.unlink(missing_ok=True)
    cmd = [str(PYTHON), "-c", _CHILD, str(report), "add", str(store), *map(str, files)]
    cmd += ["--json", *extra]
    before = load()
    t0 = time.perf_counter()
    with open(log, "ab") as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=err)
    peaks = {"VmRSS": 0, "RssAnon": 0, "RssFile": 0}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.02):
            try:
                now = proc_fields(proc.pid)
            except (OSError, ValueError):
                return
            for key, value in now.items():
                peaks[key] = max(peaks[key], value)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    tree = TreeCpu(proc.pid)
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    stop.set()
    sampler.join()
    tree_cpu = tree.done()
    if os.waitstatus_to_exitcode(status):
        raise SystemExit(f"neardup add {store} failed; see {log}")
    mem = json.loads(report.read_text())
    saves_file = Path(f"{report}.saves")
    saves = (
        [json.loads(x) for x in saves_file.read_text().splitlines()] if saves_file.exists() else []
    )
    added = json.loads(stdout)
    pages = sum(lines(f) for f in files)
    return {
        "files": len(files),
        "pages_in": pages,
        "wall_s": round(wall, 2),
        "cpu_s": round(usage.ru_utime + usage.ru_stime, 2),
        "tree_cpu_s": max(tree_cpu, round(usage.ru_utime + usage.ru_stime, 2)),
        "pages_per_s": round(pages / wall, 1),
        "peak_mib": mem["VmHWM"],
        "peak_anon_mib": peaks["RssAnon"] >> 10,
        "peak_file_mib": peaks["RssFile"] >> 10,
        "end_anon_mib": mem["RssAnon"],
        "end_file_mib": mem["RssFile"],
        "write_bytes": mem["io"]["write_bytes"],
        "saves": saves,
        "index_pages": added.get("index_pages"),
        "load_before": before,
        "load_after": load(),
    }


def graph_folder(store: Path) -> dict | None:
    """The saved graph the store's manifest names: its size, and the bytes of its files
    written by the save (not linked from another folder)."""
    name = (json.loads((store / "manifest.json").read_text()).get("graph") or {}).get("name")
    if not name:
        return None
    total = new = files = 0
    for f in (store / name).rglob("*"):
        if f.is_file():
            st = f.stat()
            total += st.st_size
            files += 1
            new += st.st_size if st.st_nlink == 1 else 0
    return {"name": name, "bytes": total, "new_bytes": new, "files": files}


def opened(store: Path, env: dict, runs: int) -> list[dict]:
    got = []
    for _ in range(runs):
        before = load()
        t0 = time.perf_counter()
        done = subprocess.run(
            [str(PYTHON), "-c", OPEN, str(store)], env=env, capture_output=True, text=True
        )
        if done.returncode:
            raise SystemExit(f"opening {store} failed:\n{done.stderr[-2000:]}")
        row = json.loads(done.stdout)
        got.append({**row, "process_s": round(time.perf_counter() - t0, 3), "load_before": before})
    return got


def checks(store: Path, env: dict, texts: list[str], queries: int, log: Path) -> dict:
    """`neardup serve STORE`, then `POST /check` from another process: one thread, then
    four. The server's open time and peak memory with them."""
    import httpx

    port = free_port()
    cmd = [str(PYTHON), "-m", "neardup.cli.main", "serve", str(store), "--port", str(port)]
    cmd += ["--rate-limit", "off"]
    texts_file = OUT / f"check-texts-{os.getpid()}.json"
    texts_file.write_text(json.dumps(texts))
    before = load()
    t0 = time.perf_counter()
    with open(log, "ab") as err:
        server = subprocess.Popen(cmd, env=env, stdout=err, stderr=subprocess.STDOUT)
    try:
        for _ in range(2400):
            try:
                httpx.get(f"http://127.0.0.1:{port}/", timeout=5)
                break
            except httpx.TransportError:
                time.sleep(0.25)
        out: dict = {"serve_open_s": round(time.perf_counter() - t0, 2), "load_before": before}
        for threads in (1, 4):
            at = load()
            done = subprocess.run(
                [str(PYTHON), "-c", CHECKS, str(port), str(queries), str(threads), str(texts_file)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            out[f"check_{threads}"] = {**json.loads(done.stdout), "load_before": at}
        out["server_peak_mib"] = (
            int(Path(f"/proc/{server.pid}/status").read_text().split("VmHWM:")[1].split()[0]) >> 10
        )
        return out
    finally:
        server.terminate()
        server.wait(120)


def base_index(pages: int, engine: str, master: str, env: dict, commit: str, log: Path) -> dict:
    """The index of pages 0 .. N-1 as `neardup add` on `engine` leaves it (built once per
    commit): its folder and how its build went."""
    folder = OUT / "bases" / f"{engine}-n{pages}"
    info = folder / "info.json"
    built = json.loads(info.read_text()) if info.exists() else {}
    if built.get("commit") == commit and (folder / "store" / "manifest.json").exists():
        return built
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    print(f"building the base index of {pages:,} pages on {engine} ...", file=sys.stderr)
    files = pages_file(0, pages, parts=2 if engine == "spark" and pages < SHARD else 1)
    got = add(folder / "store", files, engine_args(engine, master, []), env, log)
    built = {"commit": commit, "engine": engine, "store": str(folder / "store"), "build": got}
    built["rows_since_save"] = rows_since_save(folder / "store")
    built["graph"] = graph_folder(folder / "store")
    info.write_text(json.dumps(built) + "\n")
    return built


def eighth_pages(pages: int, tail: int) -> int:
    """The least count of new pages, at least N/8, after which the save rule fires for an
    index of `pages` pages `tail` rows behind its save (new pages only: a rewritten page's
    row counts too, so it fires no later)."""
    m = max(pages // 8, SAVE_AT_LEAST + 1 - tail)
    while (tail + m) * SAVE_SHARE <= pages + m:
        m += 1
    return m


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=1_000_000)
    parser.add_argument("--engine", choices=["embedded", "spark"], default="embedded")
    parser.add_argument("--master", default="local[2]", help="Spark master for --engine spark")
    parser.add_argument("--base-engine", choices=["embedded", "spark"], help="default: --engine")
    parser.add_argument(
        "--base",
        type=Path,
        help="the index of pages 0 .. N-1 built elsewhere (by another commit), used as it is",
    )
    parser.add_argument("--runs", type=int, default=3, help="1 %% increments")
    parser.add_argument("--eighth-runs", type=int, default=1)
    parser.add_argument("--opens", type=int, default=3)
    parser.add_argument("--queries", type=int, default=1000, help="POST /check a client")
    parser.add_argument("--split", type=int, help="files an increment is given in")
    parser.add_argument("--rescan-master", default="local[2]")
    parser.add_argument("--no-rescan", action="store_true")
    parser.add_argument(
        "--rescan-no-text",
        action="store_true",
        help="the re-scan keeps no page text (`--no-text`: ten million pages' text does not"
        " fit beside the bases on this machine's disk; the index keeps none either)",
    )
    parser.add_argument("--no-parity", action="store_true")
    parser.add_argument(
        "--rescan-only",
        action="store_true",
        help="only: the Spark re-scan again, against the 1 %% increments already recorded",
    )
    parser.add_argument(
        "--serve-only", action="store_true", help="only: a 1 %% increment, then POST /check"
    )
    parser.add_argument("--opens-only", action="store_true", help="only: open the base")
    args = parser.parse_args()
    env = dict(os.environ)
    commit = measured_commit(env)
    OUT.mkdir(parents=True, exist_ok=True)
    tag = f"{args.engine}-n{args.pages}"
    log = OUT / f"{tag}.log"
    n = args.pages
    extra = engine_args(args.engine, args.master, [])
    split = args.split or (2 if args.engine == "spark" else 1)
    results = OUT / "results.jsonl"
    common = {"commit": commit, "pages": n, "engine": args.engine}
    if args.engine == "spark":
        common["master"] = args.master

    def record(kind: str, row: dict) -> dict:
        line = {**common, "kind": kind, "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        line.update(row)
        with open(results, "a") as fh:
            fh.write(json.dumps(line) + "\n")
        print(json.dumps(line), file=sys.stderr, flush=True)
        return line

    base_engine = args.base_engine or args.engine
    if args.base is not None:  # built elsewhere: as it is
        built = {"store": str(args.base), "engine": base_engine, "given": True}
        built.update(rows_since_save=rows_since_save(args.base), graph=graph_folder(args.base))
    else:
        built = base_index(n, base_engine, args.master, env, commit, log)
    base = Path(built["store"])
    record("base", {"base_engine": base_engine, **{k: v for k, v in built.items() if k != "store"}})
    tail = rows_since_save(base)
    if args.opens_only:  # (no increment: the pages after N need not exist)
        for o in opened(base, env, args.opens):
            record("open", {"of": "base", **o})
        return
    one = max(1, n // 100)
    m = eighth_pages(n, tail)
    inc = pages_file(n, one, split)
    # (without eighths, only the pages after the 1 % are read, for the queries' texts: an
    # eighth of ten million pages reaches past the corpus' shards)
    eighth = pages_file(n, m if args.eighth_runs else one + 400, split)
    work = OUT / "work" / tag
    work.mkdir(parents=True, exist_ok=True)

    if args.rescan_only:
        args.serve_only, args.no_rescan, args.no_parity = True, False, True
    opens = [] if args.serve_only else [{"of": "base", **o} for o in opened(base, env, args.opens)]
    incs = []
    copy = work / "copy"
    for _ in range(0 if args.serve_only else args.runs):
        linked_copy(base, copy)
        incs.append(record("increment", {"share": 0.01, **add(copy, inc, extra, env, log)}))
    with open(eighth[0], encoding="utf-8") as fh:  # pages after the 1 %: new to its index
        texts = [json.loads(line)["text"] for _, line in zip(range(one + 400), fh, strict=False)]
    texts = texts[one:]  # and as many stored pages, 3 words replaced: they match
    with open(pages_file(0, n)[0], encoding="utf-8") as fh:
        for k, line in zip(range(len(texts)), fh, strict=False):
            words = json.loads(line)["text"].split(" ")
            for j in (1, 2, 3):
                words[(k * 7919 * j) % len(words)] = f"edit{k}-{j}"
            texts.append(" ".join(words))
    if args.serve_only and not args.rescan_only:  # the index after a 1 % increment, served
        linked_copy(base, copy)
        add(copy, inc, extra, env, log)
        record("serve", checks(copy, env, texts, args.queries, log))
        return
    served = (
        {} if args.rescan_only else record("serve", checks(copy, env, texts, args.queries, log))
    )
    eighths = []
    big = work / "eighth"
    for _ in range(0 if args.serve_only else args.eighth_runs):
        linked_copy(base, big)
        got = add(big, eighth, extra, env, log)
        got["graph"] = graph_folder(big)
        got["graph_saves"] = sum(s["kind"] == "save_graph_now" for s in got["saves"])
        eighths.append(record("eighth", {"share": round(m / n, 4), "tail_before": tail, **got}))
    if eighths:
        opens += [{"of": "after eighth", **o} for o in opened(big, env, args.opens)]
    for o in opens:
        record("open", o)

    rescan = None
    if not args.no_rescan:
        text = "-notext" if args.rescan_no_text else ""
        cache = OUT / f"rescan-n{n}-{args.rescan_master}{text}.json"
        got = json.loads(cache.read_text()) if cache.exists() else {}
        if got.get("commit") != commit or args.rescan_only:
            out = work / f"rescan-n{n}"
            shutil.rmtree(out, ignore_errors=True)
            os.sync()
            files = [*pages_file(0, n), *inc]
            spark = engine_args("spark", args.rescan_master, [])
            cmd = [str(PYTHON), "-m", "neardup.cli.main", "scan", *map(str, files)]
            cmd += ["--out", str(out), "--json", *spark]
            cmd += ["--no-text"] if args.rescan_no_text else []
            got = {"commit": commit, "pages": n + one, "out": str(out)}
            got.update(tree_timed(cmd, env, log))
            cache.write_text(json.dumps(got) + "\n")
            rescan = record("rescan", {k: v for k, v in got.items() if k != "commit"})
        else:
            rescan = got
        if args.rescan_only:  # against the 1 % increments recorded for this size and commit
            done = [json.loads(x) for x in results.read_text().splitlines()]
            for engine in ("embedded", "spark"):
                incs = [
                    r
                    for r in done
                    if r["kind"] == "increment"
                    and r["engine"] == engine
                    and r["pages"] == n
                    and r["commit"] == commit
                ]
                if incs:
                    wall = statistics.median(r["wall_s"] for r in incs)
                    cpus = [r.get("tree_cpu_s") or r["cpu_s"] for r in incs]
                    ratio = {
                        "increment_engine": engine,
                        "increment_median_s": wall,
                        "increment_median_tree_cpu_s": statistics.median(cpus),
                        "rescan_over_increment": round(rescan["wall_s"] / wall, 1),
                        "rescan_cpu_over_increment_cpu": round(
                            rescan["tree_cpu_s"] / statistics.median(cpus), 1
                        ),
                    }
                    record("rescan_ratio", ratio)
            return
        if not args.no_parity and Path(rescan["out"]).exists():
            linked_copy(base, copy)
            add(copy, inc, extra, env, log)
            record("parity", parity(copy, Path(rescan["out"])))

    def med(rows: list[dict], key: str) -> float:
        return statistics.median(r[key] for r in rows)

    summary = {
        "base_engine": base_engine,
        "base_tail": tail,
        "increment_pages": one,
        "increment_median_s": med(incs, "wall_s"),
        "increment_median_cpu_s": med(incs, "cpu_s"),
        "increment_median_tree_cpu_s": med(incs, "tree_cpu_s"),
        "increment_pages_per_s": med(incs, "pages_per_s"),
        "increment_peak_mib": [r["peak_mib"] for r in incs],
        "increment_peak_anon_mib": [r["peak_anon_mib"] for r in incs],
        "increment_peak_file_mib": [r["peak_file_mib"] for r in incs],
        "increment_saves": [len(r["saves"]) for r in incs],
        "eighth_pages": m,
        "eighth_s": [r["wall_s"] for r in eighths],
        "eighth_pages_per_s": [r["pages_per_s"] for r in eighths],
        "eighth_peak_mib": [r["peak_mib"] for r in eighths],
        "eighth_peak_anon_mib": [r["peak_anon_mib"] for r in eighths],
        "eighth_peak_file_mib": [r["peak_file_mib"] for r in eighths],
        "eighth_graph_saves": [r["graph_saves"] for r in eighths],
        "save_write_bytes": [
            s["write_bytes"] for r in eighths for s in r["saves"] if s["kind"] == "save_graph_now"
        ],
        "save_pages": [
            s["pages"] for r in eighths for s in r["saves"] if s["kind"] == "save_graph_now"
        ],
        "save_s": [s["s"] for r in eighths for s in r["saves"] if s["kind"] == "save_graph_now"],
        "graph_bytes": [r["graph"]["bytes"] for r in eighths if r["graph"]],
        "graph_new_bytes": [r["graph"]["new_bytes"] for r in eighths if r["graph"]],
        "open_base_s": [o["open_s"] for o in opens if o["of"] == "base"],
        "open_after_eighth_s": [o["open_s"] for o in opens if o["of"] == "after eighth"],
        "import_s": [o["import_s"] for o in opens],
        "check_1": served["check_1"],
        "check_4": served["check_4"],
        "load_range": [
            min(r["load_before"] for r in [*incs, *eighths]),
            max(r["load_before"] for r in [*incs, *eighths]),
        ],
    }
    if rescan is not None:
        summary["rescan_s"] = rescan["wall_s"]
        summary["rescan_load_before"] = rescan["load_before"]
        summary["rescan_over_increment"] = round(
            rescan["wall_s"] / summary["increment_median_s"], 1
        )
        summary["rescan_tree_cpu_s"] = rescan["tree_cpu_s"]
        summary["rescan_cpu_over_increment_cpu"] = round(
            rescan["tree_cpu_s"] / summary["increment_median_tree_cpu_s"], 1
        )
    record("summary", summary)
    print_table(common, summary)


def peaks(s: dict, kind: str) -> str:
    """The runs' peak RSS of an add (`kind`: increment or eighth), each with its anonymous and
    file-mapped peaks: "P (A / F), ..." in MiB."""
    runs = zip(
        s[f"{kind}_peak_mib"], s[f"{kind}_peak_anon_mib"], s[f"{kind}_peak_file_mib"], strict=True
    )
    return ", ".join(f"{p} ({a} / {f})" for p, a, f in runs)


def print_table(common: dict, s: dict) -> None:
    mib = 1 << 20
    rows = [
        (
            "index pages (N)",
            f"{common['pages']:,} ({s['base_engine']} base, {s['base_tail']:,} rows unsaved)",
        ),
        (
            "1 % add: pages, median wall / CPU s (tree CPU s)",
            f"{s['increment_pages']:,}, {s['increment_median_s']} / "
            f"{s['increment_median_cpu_s']:.2f} ({s['increment_median_tree_cpu_s']:.2f})",
        ),
        (
            "1 % add: peak RSS MiB (anon / file peaks)",
            peaks(s, "increment"),
        ),
        ("1 % add: saves (graph or changes at close)", str(s["increment_saves"])),
        ("eighth add: pages, wall s", f"{s['eighth_pages']:,}, {s['eighth_s']}"),
        (
            "eighth add: peak RSS MiB (anon / file peaks)",
            peaks(s, "eighth"),
        ),
        ("eighth add: graph saves", str(s["eighth_graph_saves"])),
        (
            "save: s, written by the applying process MiB",
            f"{s['save_s']}, {[round(b / mib, 1) for b in s['save_write_bytes']]}",
        ),
        (
            "save: at pages, KB a page of the index saved",
            ", ".join(
                f"{p:,}: {b / 1000 / p:.3f}"
                for b, p in zip(s["save_write_bytes"], s["save_pages"], strict=True)
            ),
        ),
        (
            "new graph folder MiB (not linked MiB)",
            ", ".join(
                f"{b / mib:.0f} ({nb / mib:.0f})"
                for b, nb in zip(s["graph_bytes"], s["graph_new_bytes"], strict=True)
            ),
        ),
        (
            "open s: base / after eighth (imports apart)",
            f"{s['open_base_s']} / {s['open_after_eighth_s']} (imports {s['import_s']})",
        ),
        (
            "inserts/s through neardup add: 1 % / eighth",
            f"{s['increment_pages_per_s']} / {s['eighth_pages_per_s']}",
        ),
        (
            "/check, 1 thread: q/s, p50 / p99 ms",
            f"{s['check_1']['qps']}, {s['check_1']['p50_ms']} / {s['check_1']['p99_ms']}",
        ),
        (
            "/check, 4 threads: q/s, p50 / p99 ms",
            f"{s['check_4']['qps']}, {s['check_4']['p50_ms']} / {s['check_4']['p99_ms']}",
        ),
        ("load before (adds)", str(s["load_range"])),
    ]
    if "rescan_s" in s:
        rows.append(
            (
                "Spark re-scan wall / tree CPU s (load)",
                f"{s['rescan_s']} / {s['rescan_tree_cpu_s']} ({s['rescan_load_before']})",
            )
        )
        rows.append(
            (
                "re-scan over the 1 % add: wall, CPU",
                f"{s['rescan_over_increment']}x, {s['rescan_cpu_over_increment_cpu']}x",
            )
        )
    print(f"\n| {common['engine']} {common.get('master', '')} @ {common['commit']} | |")
    print("|---|---|")
    for k, v in rows:
        print(f"| {k} | {v} |")


if __name__ == "__main__":
    main()
