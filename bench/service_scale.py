"""The incremental service at scale: insert rate, latency under load, an update batch against a
re-scan, and parity with the scan, on web-like text (issue 15).

    .venv/bin/python bench/service_scale.py --pages 100000
    .venv/bin/python bench/service_scale.py --pages 1000000

Every step is a separate process, as a user runs it, and its peak RSS is that process's own
(`os.wait4`). Steps:

1. `neardup add` of N web-like pages (`synth.webtext`: 400 words from a Zipf vocabulary of
   real pages, 10 % planted copies): pages/s and peak RSS.
2. `neardup serve` on that store, on loopback: the time to open it; an update batch of 1 % of
   the pages edited (3 words replaced each) through `POST /pages`; 20,000 new pages through
   `POST /pages` (batches of 1,000 from 2 client threads), as JSON and as an Arrow IPC
   stream side by side (`--body`, default both: quarters JSON, Arrow, JSON, Arrow); then 8
   client threads in another process, 90 % `GET /status` and 10 % `POST /check`: p50/p99
   of each, and the server's peak RSS.
3. `neardup scan` of the same final pages (the re-scan the update saves), timed; its partition
   is the independent reference: REP and RER of the service's same-group pairs against the
   scan's, counted exactly in DuckDB (pairs per cluster x group cell).
4. Where Debian's `wrk` is installed, the same latencies measured by it (7 connections on
   `/status`, 1 on `/check`): the server's own, without a Python client's CPU.

Results go to bench/out/service_scale-N.json and a Markdown row on stdout (its POST /pages
figure is JSON's; a line before it gives both forms). `--body-cost` only measures, in one
process, each body form's cost per batch of 1,000 pages (client encoding, server decoding).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "bench" / "out"
CLI = [str(ROOT / ".venv" / "bin" / "neardup")]


def corpus(pages: int) -> Path:
    """The web-like corpus of `pages` pages (generated once, shared with scale_bench.py)."""
    from neardup.synth.webtext import write_webtext

    folder = OUT / "scale"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"web-{pages}.jsonl"
    done = folder / f"web-{pages}.done"
    if not done.exists():
        write_webtext(path, pages, truth=folder / f"web-{pages}.truth.tsv")
        done.write_text("ok\n")
    return path


def run(cmd: list[str], log: Path) -> tuple[float, float]:
    """Run a command; (seconds, peak RSS MiB of that process)."""
    t0 = time.perf_counter()
    with open(log, "w") as err:
        proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} failed; see {log}")
    return time.perf_counter() - t0, usage.ru_maxrss / 1024


def edited(src: Path, share: float, dest: Path, final: Path, seed: int = 7) -> int:
    """Write the edits (a `share` of the pages, 3 words replaced each) to `dest`, and the
    final corpus (every page, edits applied) to `final`; returns the number edited."""
    rng = random.Random(seed)
    n = 0
    with open(src, encoding="utf-8") as f, open(dest, "w") as d, open(final, "w") as out:
        for line in f:
            if rng.random() < share:
                row = json.loads(line)
                words = row["text"].split(" ")
                for _ in range(3):
                    words[rng.randrange(len(words))] = f"edit{rng.randrange(10**6)}"
                row["text"] = " ".join(words)
                line = json.dumps(row, ensure_ascii=False) + "\n"
                d.write(line)
                n += 1
            out.write(line)
    return n


def parity(store: Path, run_dir: Path) -> dict[str, float]:
    """Same-group pairs of the service and of the scan, and the pairs they share. The
    service's pages are every row of its last committed version, read from its files (the
    save and the segments since: the segments alone hold only what was written since the
    save)."""
    pages = service_groups(store)
    con = duckdb.connect()
    con.register("svc_pages", pages)
    con.execute(f"ATTACH '{run_dir / 'neardup.duckdb'}' AS run (READ_ONLY)")
    row = con.execute(
        """
        WITH s AS (SELECT url, group_id FROM svc_pages
                   WHERE NOT removed AND group_id IS NOT NULL),
             c AS (SELECT url, cluster_id FROM run.pages WHERE cluster_id IS NOT NULL),
             j AS (SELECT s.group_id, c.cluster_id FROM s JOIN c USING (url))
        SELECT
          (SELECT sum(n * (n - 1) / 2) FROM (SELECT count(*) n FROM s GROUP BY group_id)),
          (SELECT sum(n * (n - 1) / 2) FROM (SELECT count(*) n FROM c GROUP BY cluster_id)),
          (SELECT sum(n * (n - 1) / 2) FROM
             (SELECT count(*) n FROM j GROUP BY group_id, cluster_id)),
          (SELECT count(*) FROM s), (SELECT count(*) FROM c)
        """
    ).fetchone()
    svc_pairs, scan_pairs, both, svc_pages, scan_pages = (float(x or 0) for x in row)
    return {
        "service_pairs": svc_pairs,
        "scan_pairs": scan_pairs,
        "REP": (svc_pairs - both) / svc_pairs if svc_pairs else 0.0,
        "RER": (scan_pairs - both) / scan_pairs if scan_pairs else 0.0,
        "service_pages": svc_pages,
        "scan_pages": scan_pages,
    }


def service_groups(store: Path, block: int = 1 << 20) -> pa.Table:
    """(url, group_id, removed) of every page slot of the index's last committed version,
    read a block of slots at a time from its page table as an opening maps it. Read row by
    row (`ServiceIndex.committed_state`, one URL looked up at a time), ten million pages
    took more than ten minutes."""
    from neardup.service import ServiceIndex

    with ServiceIndex(store, read_only=True) as ix:
        t = ix.pages
        parts = []
        for lo in range(0, t.n, block):
            slots = np.arange(lo, min(t.n, lo + block), dtype=np.int64)
            group = np.asarray(t.group[slots])
            parts.append(
                pa.table(
                    {
                        "url": pa.array(t.urls_at(slots), pa.string()),
                        "group_id": pa.array(group, pa.int64(), mask=group < 0),
                        "removed": pa.array(np.asarray(t.removed[slots]), pa.bool_()),
                    }
                )
            )
    return pa.concat_tables(parts) if parts else pa.table({"url": pa.array([], pa.string())})


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


LOAD = r"""
import json, sys, time, httpx, numpy as np
from concurrent.futures import ThreadPoolExecutor
port, n, urls_file, texts_file = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4]
urls = open(urls_file).read().split("\n")
texts = json.load(open(texts_file))
client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60,
                      limits=httpx.Limits(max_connections=16))
def one(i):
    t = time.perf_counter()
    if i % 10 == 0:
        r = client.post("/check", json={"text": texts[i % len(texts)]}); kind = "check"
    else:
        r = client.get("/status", params={"url": urls[(i * 7919) % len(urls)]}); kind = "status"
    r.raise_for_status()
    return kind, (time.perf_counter() - t) * 1000
t0 = time.perf_counter()
with ThreadPoolExecutor(8) as pool:
    got = list(pool.map(one, range(n)))
wall = time.perf_counter() - t0
out = {"rps": n / wall}
for kind in ("status", "check"):
    lat = np.array([ms for k, ms in got if k == kind])
    out[kind] = {"p50": float(np.percentile(lat, 50)), "p99": float(np.percentile(lat, 99))}
print(json.dumps(out))
"""


READS = r"""
import json, os, sys, time, httpx, numpy as np
port, urls_file, stop = int(sys.argv[1]), sys.argv[2], sys.argv[3]
urls = open(urls_file).read().split("\n")
client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60)
lat, i = [], 0
open(stop + ".ready", "w").close()
while not os.path.exists(stop):
    t = time.perf_counter()
    client.get("/status", params={"url": urls[(i * 7919) % len(urls)]}).raise_for_status()
    lat.append((time.perf_counter() - t) * 1000)
    i += 1
a = np.array(lat)
print(json.dumps({"reads": int(a.size), "p50": float(np.percentile(a, 50)),
                  "p99": float(np.percentile(a, 99)), "p999": float(np.percentile(a, 99.9)),
                  "max": float(a.max())}))
"""


def reads_during_batches(client, port: int, urls_file: Path, pages: list, headers: dict) -> dict:
    """`GET /status` from another process, one request after the other, while this one
    posts batches of 1,000 pages back to back (the issue's "reads wait for writes"): the
    reads' p50 / p99 / p99.9 / worst, in ms."""
    stop = OUT / "reads-stop"
    for f in (stop, Path(f"{stop}.ready")):
        f.unlink(missing_ok=True)
    reader = subprocess.Popen(
        [sys.executable, "-c", READS, str(port), str(urls_file), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    while not Path(f"{stop}.ready").exists():
        time.sleep(0.05)
    time.sleep(0.5)  # the reader under way before the first batch
    t0 = time.perf_counter()
    for i in range(0, len(pages), 1000):
        r = client.post("/pages", json={"pages": pages[i : i + 1000]}, headers=headers)
        r.raise_for_status()
    posted = time.perf_counter() - t0
    time.sleep(0.5)
    stop.touch()
    got = json.loads(reader.communicate(timeout=120)[0])
    return {**got, "batches": -(-len(pages) // 1000), "post_s": posted}


def new_pages(count: int, seed: int = 99) -> list[dict[str, str]]:
    """Pages no store holds yet (another seed, another host name)."""
    from neardup.synth.webtext import iter_webtext

    return [
        {"url": p.url.replace("https://", f"https://new{seed}-"), "text": p.text}
        for p in iter_webtext(count, seed=seed)
    ]


def peak_rss_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def http_steps(
    store: Path,
    src: Path,
    edits: Path,
    new: list,
    requests: int,
    log: Path,
    body: str = "both",
    during: list | None = None,
) -> dict:
    """Against `neardup serve`: the edits, then new pages through `POST /pages` (batches of
    1,000), then the status/check load from another process. `body`: the form of the
    batches, "json" (`{"pages": [...]}`), "arrow" (an Arrow IPC stream,
    `service/bulk_body.py`) or "both": the edits as JSON, and the new pages in four
    quarters, JSON, Arrow, JSON, Arrow, so each form's pages/s is measured on the same
    server over the same range of index sizes. `during`: pages posted back to back while
    another process reads (`reads_during_batches`), last."""
    import httpx

    from neardup.service.bulk_body import ARROW_STREAM, arrow_body

    port = free_port()
    env = {**os.environ, "NEARDUP_TOKEN": "bench-token"}
    cmd = [*CLI, "serve", str(store), "--port", str(port), "--rate-limit", "off"]
    t_open = time.perf_counter()
    with open(log, "w") as err:
        server = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, env=env)
    try:
        client = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600)
        for _ in range(2400):
            try:
                client.get("/")
                break
            except httpx.TransportError:
                time.sleep(0.5)
        out: dict = {"open_s": time.perf_counter() - t_open}
        headers = {"Authorization": "Bearer bench-token"}

        def post(pages: list, form: str) -> float:
            """Batches of 1,000 from 2 client threads, as a crawler's fetchers send them:
            one batch is parsed and sketched while the other is applied. The client encodes
            each batch in its thread, inside the time: on this machine its CPU is the
            server's."""
            from concurrent.futures import ThreadPoolExecutor

            def send(i: int) -> None:
                batch = pages[i : i + 1000]
                if form == "arrow":
                    arrow = {**headers, "Content-Type": ARROW_STREAM}
                    r = client.post("/pages", content=arrow_body(batch), headers=arrow)
                else:
                    r = client.post("/pages", json={"pages": batch}, headers=headers)
                r.raise_for_status()

            t0 = time.perf_counter()
            with ThreadPoolExecutor(2) as pool:
                list(pool.map(send, range(0, len(pages), 1000)))
            return time.perf_counter() - t0

        with open(edits, encoding="utf-8") as f:
            changed = [json.loads(line) for line in f]
        out["update_pages"] = len(changed)
        out["update_s"] = post(changed, "json" if body == "both" else body)
        forms = ("json", "arrow") if body == "both" else (body,)
        parts = len(forms) * (2 if body == "both" else 1)
        step = -(-len(new) // parts)
        spent = dict.fromkeys(forms, 0.0)
        sent = dict.fromkeys(forms, 0)
        for k in range(parts):
            form = forms[k % len(forms)]
            chunk = new[k * step : (k + 1) * step]
            spent[form] += post(chunk, form)
            sent[form] += len(chunk)
        for form in forms:
            out[f"post_{form}_pages_per_s"] = sent[form] / spent[form]
        # the row's figure: JSON's where it was measured (the figure of earlier runs)
        out["post_pages_per_s"] = out[f"post_{forms[0]}_pages_per_s"]
        with open(src, encoding="utf-8") as f:
            urls = [json.loads(line)["url"] for _, line in zip(range(50_000), f, strict=False)]
        uf, tf = OUT / "load-urls.txt", OUT / "load-texts.json"
        uf.write_text("\n".join(urls))
        tf.write_text(json.dumps([p["text"] for p in new[:200]]))
        load = subprocess.run(
            [sys.executable, "-c", LOAD, str(port), str(requests), str(uf), str(tf)],
            capture_output=True,
            text=True,
            check=True,
        )
        out.update(json.loads(load.stdout))
        if during:
            out["reads_during_batches"] = reads_during_batches(client, port, uf, during, headers)
        out["server_rss_mb"] = peak_rss_mb(server.pid)
        return out
    finally:
        server.terminate()
        server.wait(120)


def component_cost(sizes: tuple[int, ...] = (100, 1000, 5000), updates: int = 20) -> list[dict]:
    """Seconds to apply one changed page that sits in a component of m near-duplicates:
    the batch re-clusters the whole component (its edges and nodes), so the cost grows with
    m. Measured in-process on a fresh index per size; the median of `updates` updates."""
    import statistics
    import tempfile

    from neardup.service import PageUpdate, ServiceIndex
    from neardup.synth.webtext import iter_webtext

    base = next(iter(iter_webtext(1, seed=5))).text.split(" ")
    rng = random.Random(3)
    out = []
    for m in sizes:

        def variant(i: int) -> str:
            words = list(base)
            for _ in range(4):
                words[rng.randrange(len(words))] = f"v{i}-{rng.randrange(10**6)}"
            return " ".join(words)

        with tempfile.TemporaryDirectory() as tmp, ServiceIndex(Path(tmp) / "ix") as ix:
            pages = [PageUpdate(f"https://c.example/{i}", text=variant(i)) for i in range(m)]
            for i in range(0, m, 5000):
                ix.apply(pages[i : i + 5000])
            times = []
            for j in range(updates):
                url = f"https://c.example/{rng.randrange(m)}"
                rep = ix.apply([PageUpdate(url, text=variant(m + j))])
                times.append(rep.seconds)
            biggest = max(len(g) for g in ix.groups.values())
        edges = ix.scan_graph.edge_count()
        out.append(
            {
                "component": m,
                "edges": edges,
                "largest_group": biggest,
                "update_ms": 1000 * statistics.median(times),
            }
        )
        print(f"component of {m:,}: {out[-1]}", flush=True)
    return out


def body_cost(pages: int = 1000, repeat: int = 30) -> dict[str, float]:
    """Milliseconds per batch of `pages` web-like pages, in-process, for each `POST /pages`
    body: the client's encoding, and the server's work from body bytes to the index's
    updates (the JSON form: FastAPI's `json.loads` and the `PagesIn` model; NDJSON, a form
    weighed and not built: a `json.loads` a line and the same model; Arrow:
    `bulk_body.read_arrow_pages`). The medians of `repeat` runs."""
    import statistics

    from pydantic import TypeAdapter

    from neardup.service.api_models import PagesIn, page_updates
    from neardup.service.bulk_body import arrow_body, read_arrow_pages

    batch = new_pages(pages, seed=5)
    model = TypeAdapter(PagesIn)
    as_json = json.dumps({"pages": batch}).encode()
    as_lines = "\n".join(json.dumps(p) for p in batch).encode()
    as_arrow = arrow_body(batch)
    steps = {
        "json_encode": lambda: json.dumps({"pages": batch}).encode(),
        "json_read": lambda: page_updates(model.validate_python(json.loads(as_json)).pages),
        "ndjson_read": lambda: page_updates(
            model.validate_python({"pages": [json.loads(x) for x in as_lines.split(b"\n")]}).pages
        ),
        "arrow_encode": lambda: arrow_body(batch),
        "arrow_read": lambda: read_arrow_pages(as_arrow),
    }
    out: dict[str, float] = {"json_mb": len(as_json) / 1e6, "arrow_mb": len(as_arrow) / 1e6}
    for name, step in steps.items():
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            step()
            times.append((time.perf_counter() - t0) * 1000)
        out[f"{name}_ms"] = statistics.median(times)
    return out


def wrk_load(store: Path, seconds: int = 20) -> dict | None:
    """Latency measured by wrk (a C load generator, Debian's `wrk`), when it is installed:
    7 connections asking `GET /status` for stored URLs and 1 posting `/check`, at once, for
    `seconds`. The Python client above spends as much CPU as the server on this 2-core
    machine; wrk shows what the server itself sustains. None without wrk."""
    import shutil
    import urllib.parse

    if shutil.which("wrk") is None:
        return None
    uf, tf = OUT / "load-urls.txt", OUT / "load-texts.json"
    urls = [u for u in uf.read_text().split("\n") if u][:5000]
    status_lua, check_lua = OUT / "wrk-status.lua", OUT / "wrk-check.lua"
    paths = ",".join(json.dumps("/status?url=" + urllib.parse.quote(u, safe="")) for u in urls)
    status_lua.write_text(
        f"local urls = {{{paths}}}\nlocal i = 0\n"
        "request = function() i = i + 1; "
        'return wrk.format("GET", urls[(i * 7919) % #urls + 1]) end\n'
    )
    body = json.dumps({"text": json.loads(tf.read_text())[0]})
    check_lua.write_text(
        f'wrk.method = "POST"\nwrk.path = "/check"\nwrk.body = {json.dumps(body)}\n'
        'wrk.headers["Content-Type"] = "application/json"\n'
    )
    port = free_port()
    cmd = [*CLI, "serve", str(store), "--port", str(port), "--rate-limit", "off"]
    with open(OUT / "wrk-serve.log", "w") as err:
        server = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT)
    try:
        import httpx

        for _ in range(2400):
            try:
                httpx.get(f"http://127.0.0.1:{port}/")
                break
            except httpx.TransportError:
                time.sleep(0.5)
        base = f"http://127.0.0.1:{port}"
        common = ["wrk", "-t1", f"-d{seconds}s", "--latency"]
        runs = {
            "status": subprocess.Popen(
                [*common, "-c7", "-s", str(status_lua), base], stdout=subprocess.PIPE, text=True
            ),
            "check": subprocess.Popen(
                [*common, "-c1", "-s", str(check_lua), base], stdout=subprocess.PIPE, text=True
            ),
        }
        out: dict = {}
        for kind, proc in runs.items():
            text, _ = proc.communicate()
            out[kind] = {
                "rps": float(text.split("Requests/sec:")[1].split()[0]),
                "p50": _wrk_ms(text, "50%"),
                "p99": _wrk_ms(text, "99%"),
                "errors": "Non-2xx" in text,
            }
        return out
    finally:
        server.terminate()
        server.wait(120)


def _wrk_ms(text: str, label: str) -> float:
    """A latency percentile of wrk's --latency table ("  99%   9.35ms"), in ms."""
    import re

    found = re.search(rf"^\s+{re.escape(label)}\s+([\d.]+)(us|ms|s)\s*$", text, re.MULTILINE)
    if found is None:
        raise ValueError(f"no {label} line in wrk's output")
    return float(found[1]) * {"us": 1e-3, "ms": 1.0, "s": 1000.0}[found[2]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--pages", type=int, default=100_000)
    ap.add_argument("--batch", type=int, default=5000)
    ap.add_argument("--requests", type=int, default=3000)
    ap.add_argument(
        "--during",
        type=int,
        default=30_000,
        help="pages posted back to back while another process reads /status",
    )
    ap.add_argument("--work", type=Path, default=Path("/tmp/neardup-service-scale"))
    ap.add_argument(
        "--component", action="store_true", help="only: the cost of one update in a large component"
    )
    ap.add_argument("--wrk-only", action="store_true", help="only: wrk against the last store")
    ap.add_argument(
        "--http-only", action="store_true", help="only: step 2 against the last store, new pages"
    )
    ap.add_argument(
        "--body",
        choices=("json", "arrow", "both"),
        default="both",
        help="POST /pages bodies: JSON, an Arrow IPC stream, or both side by side (default)",
    )
    ap.add_argument(
        "--body-cost",
        action="store_true",
        help="only: per-batch cost of each POST /pages body form, in-process",
    )
    a = ap.parse_args(argv)
    if a.body_cost:
        print(json.dumps(body_cost(), indent=2))
        return 0
    if a.component:
        rows = component_cost()
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "service_component.json").write_text(json.dumps(rows, indent=2))
        return 0
    if a.wrk_only:
        print(json.dumps(wrk_load(a.work / str(a.pages) / "store")))
        return 0
    if a.http_only:
        work = a.work / str(a.pages)
        (work / "none.jsonl").write_text("")
        seed = int(time.time()) % 10_000 + 100
        step = http_steps(
            work / "store",
            corpus(a.pages),
            work / "none.jsonl",
            new_pages(20_000, seed=seed),
            a.requests,
            work / "serve-again.log",
            a.body,
            new_pages(a.during, seed=seed + 1),
        )
        print(json.dumps(step))
        return 0
    src = corpus(a.pages)
    work = a.work / str(a.pages)
    work.mkdir(parents=True, exist_ok=True)
    store, run_dir = work / "store", work / "run"
    res: dict = {"pages": a.pages, "batch": a.batch}
    subprocess.run(["rm", "-rf", str(store)], check=True)
    secs, rss = run(
        [*CLI, "add", str(store), str(src), "--batch", str(a.batch), "--no-links"], work / "add.log"
    )
    res.update(add_s=secs, add_pages_per_s=a.pages / secs, add_rss_mb=rss)
    print(f"add: {secs:.1f} s, {a.pages / secs:,.0f} pages/s, {rss:,.0f} MiB", flush=True)
    edits, final = work / "edits.jsonl", work / "final.jsonl"
    edited(src, 0.01, edits, final)
    new = new_pages(20_000)
    during = new_pages(a.during, seed=77)
    with open(final, "a", encoding="utf-8") as f:
        f.writelines(json.dumps(p, ensure_ascii=False) + "\n" for p in [*new, *during])
    res["http"] = h = http_steps(
        store, src, edits, new, a.requests, work / "serve.log", a.body, during
    )
    print(f"http: {h}", flush=True)
    print(
        "POST /pages: "
        + ", ".join(
            f"{f} {h[f'post_{f}_pages_per_s']:,.0f}"
            for f in ("json", "arrow")
            if f"post_{f}_pages_per_s" in h
        )
        + " pages/s",
        flush=True,
    )
    secs, rss = run([*CLI, "scan", str(final), "--out", str(run_dir), "--force"], work / "scan.log")
    res.update(rescan_s=secs, rescan_rss_mb=rss, update_vs_rescan=secs / h["update_s"])
    print(f"re-scan: {secs:.1f} s ({res['update_vs_rescan']:.1f}x the update)", flush=True)
    res["parity"] = parity(store, run_dir)
    print(f"parity: {res['parity']}", flush=True)
    res["wrk"] = wrk_load(store)
    print(f"wrk: {res['wrk']}", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / f"service_scale-{a.pages}.json").write_text(json.dumps(res, indent=2))
    print(
        f"| {a.pages:,} | {res['add_pages_per_s']:,.0f} | {h['post_pages_per_s']:,.0f} "
        f"| {res['add_rss_mb']:,.0f} | {h['status']['p50']:.1f} / {h['status']['p99']:.1f} "
        f"| {h['check']['p50']:.1f} / {h['check']['p99']:.1f} | {h['update_s']:.1f} "
        f"| {res['rescan_s']:.1f} | {res['update_vs_rescan']:.1f}x "
        f"| {100 * res['parity']['REP']:.2f} % | {100 * res['parity']['RER']:.2f} % |"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
