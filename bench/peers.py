"""Head to head with the tools users would pick instead of neardup (issue 9).

Same input, same task (near-duplicates at 5-word-shingle resemblance 0.8, 128 permutations),
each tool used the way its documentation shows: datasketch, rensa, text-dedup and datatrove
against `neardup scan docs.jsonl --out run/`. Measured per tool: wall time, CPU time (the
process tree's user + system), peak memory (RSS summed over the process tree, sampled every
50 ms), agreement with neardup and precision/recall against a generated truth
(bench/peers_data.py says how the input and truth are made).

The peers live in their own venv (bench/out/peers-venv, Python >= 3.12 because text-dedup 0.4.1
needs it), never in the project's; each runs as a child process (bench/peers_tools.py).

    .venv/bin/python bench/peers.py setup                      # the peers' venv
    .venv/bin/python bench/peers.py gen --sizes 10000 100000   # inputs + truth
    .venv/bin/python bench/peers.py run --sizes 10000 100000 [--tools neardup datasketch ...]
    .venv/bin/python bench/peers.py report                     # bench/out/peers/peers.md + PNG

Everything is written under bench/out/peers/ (git-ignored); `report` also writes
docs/peers_cost.png.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import psutil

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
OUT = BENCH / "out" / "peers"
VENV = BENCH / "out" / "peers-venv"
PEER_PY = VENV / "bin" / "python"
NEARDUP = REPO / ".venv" / "bin" / "neardup"
TOOLS = ("neardup", "datasketch", "rensa", "text-dedup", "datatrove")
PLOT = REPO / "docs" / "peers_cost.png"


def size_dir(n: int) -> Path:
    return OUT / f"n{n}"


# ---------------------------------------------------------------------------------- setup


def find_python312() -> str:
    """A Python >= 3.12 for the peers' venv: $PEERS_PYTHON, python3.1x on PATH, or pyenv's."""
    candidates = [os.environ.get("PEERS_PYTHON", "")]
    candidates += [shutil.which(f"python3.{m}") or "" for m in (13, 12)]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[23]*/bin/python")))
    for exe in candidates:
        # a pyenv shim exists on PATH even when its version is not enabled, and then fails
        if exe and Path(exe).exists() and subprocess.run([exe, "-c", ""]).returncode == 0:
            return exe
    raise SystemExit("text-dedup 0.4.1 needs Python >= 3.12; set PEERS_PYTHON to one")


def setup() -> None:
    """Create bench/out/peers-venv and install bench/peers-requirements.txt into it."""
    if not PEER_PY.exists():
        subprocess.run([find_python312(), "-m", "venv", str(VENV)], check=True)
    pip = [str(PEER_PY), "-m", "pip", "install", "-q"]
    subprocess.run([*pip, "-U", "pip"], check=True)
    subprocess.run([*pip, "-r", str(BENCH / "peers-requirements.txt")], check=True)


# ------------------------------------------------------------------------------------ gen


def gen(sizes: list[int], seed: int) -> None:
    """Write docs.jsonl (+ .parquet up to 100k), truth.npz and truth_pairs.npy per size."""
    sys.path.insert(0, str(BENCH))
    import peers_data

    pool = peers_data.word_pool(OUT / "pool.txt")
    for n in sizes:
        d = size_dir(n)
        t = time.perf_counter()
        corpus = peers_data.generate(pool, n, seed)
        peers_data.write(corpus, d, parquet=n <= 100_000)
        pairs = peers_data.truth_pairs(corpus.texts, corpus.group)
        np.save(d / "truth_pairs.npy", pairs)
        info = {"docs": n, "truth_pairs": len(pairs), "seed": seed, "pool_words": len(pool)}
        if n <= 10_000:
            info["cross_group_pairs_j_ge_0.5"] = peers_data.check_cross_groups(
                corpus.texts, corpus.group
            )
        shards = d / "shards"  # for datatrove, whose readers split work by file
        shards.mkdir(exist_ok=True)
        lines = (d / "docs.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
        half = len(lines) // 2
        for k, part in enumerate((lines[:half], lines[half:])):
            (shards / f"part{k}.jsonl").write_text("".join(part), encoding="utf-8")
        info["jsonl_mb"] = (d / "docs.jsonl").stat().st_size / 1e6
        (d / "info.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
        print(f"n={n}: {info} in {time.perf_counter() - t:.0f}s", file=sys.stderr)


# ------------------------------------------------------------------------------------ run


def measure(cmd: list[str], log: Path, timeout: float) -> dict:
    """Run `cmd`; wall and CPU seconds of its process tree and its peak summed RSS."""
    peak = [0.0]
    cpu_seen: dict[int, float] = {}  # pid -> last user+system seconds seen
    stop = threading.Event()
    before = os.times()
    started = time.perf_counter()
    with log.open("w") as fh:
        popen = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
        proc = psutil.Process(popen.pid)

        def sample() -> None:
            while not stop.is_set():
                try:
                    procs = [proc, *proc.children(recursive=True)]
                    rss = 0
                    for p in procs:
                        try:
                            rss += p.memory_info().rss
                            t = p.cpu_times()
                            cpu_seen[p.pid] = t.user + t.system
                        except psutil.Error:
                            pass
                    peak[0] = max(peak[0], rss / 2**20)
                except psutil.Error:
                    pass
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            rc = popen.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for p in [*proc.children(recursive=True), proc]:
                with contextlib.suppress(psutil.Error):
                    p.kill()
            popen.wait()
            rc = "timeout"
        stop.set()
        sampler.join()
    wall = time.perf_counter() - started
    after = os.times()
    # Children's rusage misses grandchildren nobody waited for (pool workers); the sampled
    # per-process times miss each process's last 50 ms. The larger of the two is kept.
    waited = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    cpu = max(waited, sum(cpu_seen.values()))
    return {"rc": rc, "wall_seconds": wall, "cpu_seconds": cpu, "peak_rss_mb": peak[0]}


def neardup_result(run: Path) -> tuple[np.ndarray, np.ndarray]:
    """(pairs, removed) of a neardup run, as input ids: verified and identical pairs; pages
    in a cluster that are not its representative."""
    import pyarrow.parquet as pq

    pages = pq.read_table(
        run / "pages.parquet", columns=["doc_id", "record_id", "cluster_id", "is_representative"]
    ).to_pydict()
    to_id = {d: int(r) for d, r in zip(pages["doc_id"], pages["record_id"], strict=True)}
    removed = sorted(
        to_id[d]
        for d, c, rep in zip(
            pages["doc_id"], pages["cluster_id"], pages["is_representative"], strict=True
        )
        if c is not None and not rep
    )
    pt = pq.read_table(run / "pairs.parquet", columns=["doc_a", "doc_b"]).to_pydict()
    pairs = sorted(
        {
            (min(to_id[a], to_id[b]), max(to_id[a], to_id[b]))
            for a, b in zip(pt["doc_a"], pt["doc_b"], strict=True)
        }
    )
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2), np.asarray(removed, dtype=np.int64)


def run_tool(tool: str, n: int, workers: int, timeout: float, fmt: str = "jsonl") -> dict:
    """One measured run of `tool` on the size-`n` input; its result.npz and metrics.json."""
    d = size_dir(n)
    work = d / (f"{tool}-{fmt}" if fmt != "jsonl" else tool)
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    docs = d / f"docs.{fmt}"
    if tool == "neardup":
        cmd = [
            str(NEARDUP),
            "scan",
            str(docs),
            "--out",
            str(work / "run"),
            "--workers",
            str(workers),
        ]
    else:
        cmd = [str(PEER_PY), str(BENCH / "peers_tools.py"), tool, str(docs), str(work)]
        cmd += ["--workers", str(workers)]
    m = measure(cmd, work / "log.txt", timeout)
    m.update({"tool": tool, "docs": n, "format": fmt, "command": " ".join(cmd)})
    if m["rc"] == 0:
        if tool == "neardup":
            pairs, removed = neardup_result(work / "run")
            np.savez(work / "result.npz", pairs=pairs, removed=removed)
            summary = json.loads((work / "run" / "summary.json").read_text())
            m["phases"] = summary["stage_seconds"]
        else:
            m["phases"] = json.loads((work / "phases.json").read_text())
    (work / "metrics.json").write_text(json.dumps(m, indent=1), encoding="utf-8")
    print(json.dumps({k: v for k, v in m.items() if k != "command"}), file=sys.stderr)
    return m


# -------------------------------------------------------------------------------- scoring


def _components(n: int, pairs: np.ndarray) -> np.ndarray:
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    g = sp.coo_matrix((np.ones(len(pairs)), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    return connected_components(g, directed=False)[1]


def _pair_set(pairs: np.ndarray) -> set[tuple[int, int]]:
    return set(map(tuple, pairs.tolist()))


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a | b else 1.0


def score(n: int, result: dict[str, np.ndarray], truth: np.ndarray, ref: dict | None) -> dict:
    """Precision/recall against the truth and agreement with neardup (`ref`).

    Removed docs: a truth component C (docs joined by truth pairs) should lose |C| - 1 docs;
    correct removals are sum over C of min(|removed ∩ C|, |C| - 1), so dropping every copy of
    a document counts one wrong removal. precision = correct / removed,
    recall = correct / sum(|C| - 1).
    Pairs (tools that report pairs): precision = share of reported pairs that are truth pairs;
    recall = share of truth pairs whose two docs the reported pairs connect.
    """
    comp = _components(n, truth)
    sizes = np.bincount(comp)
    removed = result["removed"]
    in_comp = np.bincount(comp[removed], minlength=sizes.size)
    correct = int(np.minimum(in_comp, sizes - 1).sum())
    should = int((sizes - 1).sum())
    out = {
        "removed": int(removed.size),
        "removed_precision": correct / removed.size if removed.size else 1.0,
        "removed_recall": correct / should if should else 1.0,
    }
    if "pairs" in result:
        pairs = result["pairs"]
        tset = _pair_set(truth)
        pset = _pair_set(pairs)
        pc = _components(n, pairs) if len(pairs) else np.arange(n)
        out["pairs"] = len(pset)
        out["pair_precision"] = len(pset & tset) / len(pset) if pset else 1.0
        out["pair_recall"] = float(np.mean(pc[truth[:, 0]] == pc[truth[:, 1]]))
    if ref is not None:
        out["removed_agreement"] = _jaccard(set(removed.tolist()), set(ref["removed"].tolist()))
        if "pairs" in result:
            out["pair_agreement"] = _jaccard(_pair_set(result["pairs"]), _pair_set(ref["pairs"]))
    return out


# --------------------------------------------------------------------------------- report


def _load(work: Path) -> tuple[dict, dict | None]:
    m = json.loads((work / "metrics.json").read_text())
    res = dict(np.load(work / "result.npz")) if (work / "result.npz").exists() else None
    return m, res


def _versions() -> str:
    out = subprocess.run(
        [str(PEER_PY), "-m", "pip", "list", "--format=json"], capture_output=True, text=True
    )
    wanted = {"datasketch", "rensa", "text-dedup", "datatrove", "datasets", "spacy", "polars"}
    peers = {p["name"].lower(): p["version"] for p in json.loads(out.stdout or "[]")}
    from importlib.metadata import version

    parts = [f"neardup {version('neardup')}", f"numba {version('numba')}"]
    parts += [f"{k} {peers[k]}" for k in sorted(wanted) if k in peers]
    py = subprocess.run([str(PEER_PY), "-V"], capture_output=True, text=True).stdout.strip()
    return ", ".join(parts) + f"; peers on {py}, neardup on Python {platform.python_version()}"


def report() -> None:
    """bench/out/peers/peers.md (tables) and the cost-curve plot."""
    lines = [
        f"Machine: {platform.machine()}, {psutil.cpu_count()} cores, "
        f"{psutil.virtual_memory().total / 2**30:.0f} GiB. Versions: {_versions()}.",
        "",
    ]
    curve = []
    for d in sorted(OUT.glob("n*"), key=lambda p: int(p.name[1:])):
        n = int(d.name[1:])
        truth = np.load(d / "truth_pairs.npy")
        info = json.loads((d / "info.json").read_text())
        ref = None
        if (d / "neardup" / "result.npz").exists():
            ref = dict(np.load(d / "neardup" / "result.npz"))
        lines += [
            f"### {n:,} documents ({info['jsonl_mb']:.0f} MB JSONL, {len(truth):,} truth pairs)",
            "",
            "| tool | wall s | CPU s | peak RSS MB | removed | removed P / R | pairs "
            "| pair P / R | agreement with neardup: removed / pairs | phases (s) |",
            "|---|---:|---:|---:|---:|---|---:|---|---|---|",
        ]
        works = [d / t for t in TOOLS] + [d / "neardup-parquet"]
        for work in works:
            if not (work / "metrics.json").exists():
                continue
            m, res = _load(work)
            name = m["tool"] + (f" ({m['format']})" if m["format"] != "jsonl" else "")
            if m["tool"] == "neardup" and m["format"] == "jsonl" and m["rc"] == 0:
                curve.append((n, m["wall_seconds"], m["peak_rss_mb"], m["phases"]))
            if m["rc"] != 0 or res is None:
                lines.append(
                    f"| {name} | {m['wall_seconds']:.1f} | | {m['peak_rss_mb']:.0f} "
                    f"| failed: rc={m['rc']} | | | | | |"
                )
                continue
            s = score(n, res, truth, ref)
            pairs = f"{s['pairs']:,}" if "pairs" in s else "–"
            ppr = f"{s['pair_precision']:.4f} / {s['pair_recall']:.4f}" if "pairs" in s else "–"
            agree = f"{s.get('removed_agreement', float('nan')):.4f}"
            agree += f" / {s['pair_agreement']:.4f}" if "pair_agreement" in s else " / –"
            phases = ", ".join(f"{k} {v:.1f}" for k, v in m.get("phases", {}).items())
            lines.append(
                f"| {name} | {m['wall_seconds']:.1f} | {m['cpu_seconds']:.1f} "
                f"| {m['peak_rss_mb']:.0f} | {s['removed']:,} "
                f"| {s['removed_precision']:.4f} / {s['removed_recall']:.4f} | {pairs} | {ppr} "
                f"| {agree} | {phases} |"
            )
        lines.append("")
    if curve:
        lines += [
            "### neardup cost curve",
            "",
            "| docs | wall s | docs/s | peak RSS MB | stage seconds |",
            "|---:|---:|---:|---:|---|",
        ]
        for n, wall, rss, phases in curve:
            st = ", ".join(f"{k} {v:.1f}" for k, v in phases.items())
            lines.append(f"| {n:,} | {wall:.1f} | {n / wall:,.0f} | {rss:.0f} | {st} |")
        (OUT / "curve.json").write_text(json.dumps(curve), encoding="utf-8")
        subprocess.run([str(PEER_PY), __file__, "plot"], check=False)
    text = "\n".join(lines) + "\n"
    (OUT / "peers.md").write_text(text, encoding="utf-8")
    print(text)


def plot() -> None:
    """docs/peers_cost.png: neardup's time and memory against size, and every tool's time
    (run with the peers' venv, the only one with matplotlib)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4))
    for tool in TOOLS:
        pts = []
        for d in OUT.glob("n*"):
            f = d / tool / "metrics.json"
            if f.exists():
                m = json.loads(f.read_text())
                if m["rc"] == 0:
                    pts.append((m["docs"], m["wall_seconds"], m["peak_rss_mb"]))
        if not pts:
            continue
        pts.sort()
        xs, ts, rs = zip(*pts, strict=True)
        style = "o-" if tool == "neardup" else "s--"
        ax1.plot(xs, ts, style, label=tool)
        ax2.plot(xs, rs, style, label=tool)
    for ax, label in ((ax1, "wall time (s)"), (ax2, "peak RSS, process tree (MB)")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("documents")
        ax.set_ylabel(label)
        ax.grid(True, which="both", alpha=0.3)
    ax1.legend()
    fig.suptitle("Near-duplicates at J >= 0.8, K = 128, 2 cores")
    fig.tight_layout()
    fig.savefig(PLOT, dpi=110)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    sub.add_parser("setup")
    g = sub.add_parser("gen")
    g.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    g.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("run")
    r.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    r.add_argument("--tools", nargs="+", default=list(TOOLS), choices=TOOLS)
    r.add_argument("--workers", type=int, default=psutil.cpu_count() or 2)
    r.add_argument("--timeout", type=float, default=900, help="seconds before a run is killed")
    r.add_argument("--parquet", action="store_true", help="also scan docs.parquet with neardup")
    sub.add_parser("report")
    sub.add_parser("plot")
    args = parser.parse_args(argv)
    if args.cmd == "setup":
        setup()
    elif args.cmd == "gen":
        gen(args.sizes, args.seed)
    elif args.cmd == "run":
        for n in args.sizes:
            for tool in args.tools:
                run_tool(tool, n, args.workers, args.timeout)
            if args.parquet and "neardup" in args.tools and (size_dir(n) / "docs.parquet").exists():
                run_tool("neardup", n, args.workers, args.timeout, fmt="parquet")
    elif args.cmd == "report":
        report()
    else:
        plot()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
