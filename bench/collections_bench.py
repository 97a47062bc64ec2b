"""Replicated collections, mirrored hosts and the avoid-list against a stated topology.

Two crawls with known answers:

* docs-mirrors (bench/docs_crawl.py --topology mirrors): three real manuals (PostgreSQL,
  Python, LLVM), each on five hosts: primary, full mirror, stale copy (older release),
  partial copy (30 % of pages dropped, links to them go to the primary) and a re-rooted copy
  under another prefix on mirror-d.example, which holds all three manuals;
* the synthetic demo crawl (neardup.synth, 250 documents): primary, full mirror, stale copy,
  partial mirror, a `www.` alias and unrelated hosts.

Truth: one collection per manual, cardinality = its hosts, size = the primary's pages; every
pair of hosts serving copies of the same manual is a mirror pair (`mirror` when both hold the
whole manual and nothing else, else `partial`); the `www.` host is an alias of the primary.

    python bench/collections_bench.py [--scan]   # --scan re-runs `neardup scan` first

Writes bench/out/collections.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "out"
NEARDUP = [sys.executable, "-m", "neardup.cli.main"]

try:
    import neardup  # noqa: F401
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(ROOT / "src"))

from neardup.linkgraph.avoid import build_avoid_list  # noqa: E402
from neardup.linkgraph.collections import find_collections  # noqa: E402
from neardup.linkgraph.mirrors import find_mirrors  # noqa: E402
from neardup.linkgraph.relational import connect  # noqa: E402


def scan(inputs: list[Path], run: Path) -> float:
    started = time.perf_counter()
    cmd = [*NEARDUP, "scan", *map(str, inputs), "--out", str(run), "--force", "-q"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def docs_truth(topology: dict) -> dict:
    """Collections and host pairs of the docs-mirrors topology."""
    manuals: dict[str, list[dict]] = {}
    for h in topology["hosts"]:
        manuals.setdefault(h["manual"], []).append(h)
    shared_hosts = {
        h["host"]
        for h in topology["hosts"]
        if sum(x["host"] == h["host"] for x in topology["hosts"]) > 1
    }
    pairs = {}
    for hosts in manuals.values():
        for a, b in itertools.combinations(hosts, 2):
            whole = not ({a["role"], b["role"]} & {"partial"}) and not (
                {a["host"], b["host"]} & shared_hosts
            )
            pairs[frozenset((a["host"], b["host"]))] = "mirror" if whole else "partial"
    collections = {
        m: {
            "cardinality": len(hosts),
            "size": next(h["pages"] for h in hosts if h["role"] == "primary"),
            "pages": sum(h["pages"] for h in hosts),
            "bases": [h["base_url"] for h in hosts],
            "primary": next(h["host"] for h in hosts if h["role"] == "primary"),
        }
        for m, hosts in manuals.items()
    }
    return {"collections": collections, "pairs": pairs, "aliases": set()}


def synth_truth(topology: dict) -> dict:
    hosts = topology["hosts"]
    roles = ("primary", "mirror", "stale", "partial")
    pairs = {}
    for a, b in itertools.combinations(roles, 2):
        kind = "partial" if "partial" in (a, b) else "mirror"
        pairs[frozenset((hosts[a]["host"], hosts[b]["host"]))] = kind
    docs = topology["documents"] + 1  # pages + the index
    missing = len(topology["partial_missing_pages"])
    collections = {
        "pyref": {
            "cardinality": 4,
            "size": docs,
            "pages": 3 * docs + docs - missing,
            "bases": [f"https://{hosts[r]['host']}{hosts[r]['prefix']}" for r in roles],
            "primary": hosts["primary"]["host"],
        }
    }
    aliases = {frozenset((hosts["primary"]["host"], topology["alias_host"]))}
    return {"collections": collections, "pairs": pairs, "aliases": aliases}


def evaluate(run: Path, truth: dict) -> dict:
    con = connect(run)
    t0 = time.perf_counter()
    coll = find_collections(con)
    t1 = time.perf_counter()
    mirrors = find_mirrors(con)
    t2 = time.perf_counter()
    avoid = build_avoid_list(con, coll, mirrors)
    t3 = time.perf_counter()
    con.close()
    pages = coll.pages.to_pylist()
    clusters = coll.clusters.to_pylist()
    rows = []
    matched = set()
    for name, t in truth["collections"].items():
        inside = [p for p in pages if any(p["url"].startswith(b) for b in t["bases"])]
        by_cluster: dict[int, int] = {}
        for p in inside:
            by_cluster[p["collection_cluster_id"]] = (
                by_cluster.get(p["collection_cluster_id"], 0) + 1
            )
        best = max(by_cluster, key=by_cluster.get) if by_cluster else None
        found = next((c for c in clusters if c["collection_cluster_id"] == best), None)
        matched.add(best)
        rows.append(
            {
                "collection": name,
                "true_cardinality": t["cardinality"],
                "found_cardinality": found["cardinality"] if found else 0,
                "true_size": t["size"],
                "found_size": found["size"] if found else 0,
                "pages": t["pages"],
                "covered": by_cluster.get(best, 0),
                "principal_ok": bool(found and found["principal_host"] == t["primary"]),
                "description": found["description"] if found else "",
            }
        )
    false = [c for c in clusters if c["collection_cluster_id"] not in matched]
    confirmed = {frozenset((r["host_a"], r["host_b"])): r for r in mirrors.confirmed().to_pylist()}
    aliases = {
        frozenset((r["host_a"], r["host_b"]))
        for r in mirrors.pairs.to_pylist()
        if r["kind"] == "alias"
    }
    bb = {
        frozenset((r["host_1"], r["host_2"]))
        for r in mirrors.suffix_pairs.to_pylist()
        if r["confirmed"]
    } - aliases

    def pr(found: set, true: set) -> tuple[float, float]:
        tp = len(found & true)
        return (tp / len(found) if found else 1.0, tp / len(true) if true else 1.0)

    true_pairs = set(truth["pairs"])
    kinds_ok = sum(confirmed[p]["kind"] == truth["pairs"][p] for p in set(confirmed) & true_pairs)
    return {
        "collections": rows,
        "false_collections": [(c["description"], c["cardinality"], c["size"]) for c in false],
        "mirror_pairs": (len(confirmed), len(true_pairs), *pr(set(confirmed), true_pairs)),
        "suffix_method": (len(bb), *pr(bb, true_pairs)),
        "kinds_ok": (kinds_ok, len(set(confirmed) & true_pairs)),
        "aliases": (len(aliases), len(truth["aliases"]), len(aliases & truth["aliases"])),
        "auto_mirrors": mirrors.auto_mirrors,
        "avoid": (
            avoid.pages,
            avoid.crawl_pages,
            avoid.bytes,
            avoid.crawl_bytes,
            avoid.entries.num_rows,
        ),
        "seconds": {"collections": t1 - t0, "mirrors": t2 - t1, "avoid-list": t3 - t2},
    }


def report(name: str, topology_note: str, result: dict, scan_s: float | None) -> list[str]:
    lines = [f"## {name}", "", topology_note, ""]
    lines += [
        "| collection | cardinality (true / found) | size (true / found) | pages covered "
        "| principal | description |",
        "|---|---|---|---|---|---|",
    ]
    for r in result["collections"]:
        share = r["covered"] / r["pages"] if r["pages"] else 0
        lines.append(
            f"| {r['collection']} | {r['true_cardinality']} / {r['found_cardinality']} "
            f"| {r['true_size']:,} / {r['found_size']:,} | {r['covered']:,} of {r['pages']:,} "
            f"({share:.1%}) | {'right' if r['principal_ok'] else 'wrong'} | {r['description']} |"
        )
    n, true, p, rcl = result["mirror_pairs"]
    bn, bp, br = result["suffix_method"]
    ok, of = result["kinds_ok"]
    fa, ta, both = result["aliases"]
    saved, crawl, b, cb, entries = result["avoid"]
    false = result["false_collections"]
    lines += [
        "",
        "| measure | value |",
        "|---|---|",
        f"| false collections above the noise size | {len(false)}"
        + (f": {false}" if false else "")
        + " |",
        f"| mirror pairs, content method (Fetterly et al.) | {n} found, {true} true: "
        f"precision {p:.3f}, recall {rcl:.3f} |",
        f"| mirror pairs, URL-suffix method (Bharat & Broder) | {bn} confirmed: precision "
        f"{bp:.3f}, recall {br:.3f} |",
        f"| kind (mirror / partial) as stated | {ok} of {of} |",
        f"| aliases | {fa} found, {ta} true, {both} right |",
        f"| auto-mirrors set aside | {result['auto_mirrors']} |",
        f"| avoid-list | {entries} entries; saves {saved:,} of {crawl:,} fetches "
        f"({saved / crawl:.1%}), {b / 1e6:,.1f} of {cb / 1e6:,.1f} MB |",
        "| time | "
        + ", ".join(f"{k} {v:.2f}s" for k, v in result["seconds"].items())
        + (f" (scan {scan_s:.1f}s)" if scan_s is not None else "")
        + " |",
        "",
    ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scan", action="store_true", help="re-run the scans first")
    args = parser.parse_args(argv)
    lines = [
        "# Replicated collections and mirrors",
        "",
        "Made by `python bench/collections_bench.py --scan`.",
        "",
    ]

    docs = OUT / "docs-mirrors"
    if (docs / "topology.json").exists():
        run = OUT / "docs-mirrors-run"
        scan_s = (
            scan(sorted(docs.glob("*.warc.gz")), run) if args.scan or not run.exists() else None
        )
        topology = json.loads((docs / "topology.json").read_text())
        note = (
            "Topology (topology.json): per manual (postgresql, python, llvm) a primary, a full "
            "mirror, a stale copy (older release), a partial copy (30 % of pages dropped, links "
            "to them go to the primary) and a re-rooted copy under /pub/docs/<manual>/current/ "
            f"on mirror-d.example; {sum(h['warc_records'] for h in topology['hosts']):,} WARC "
            "records. True mirror pairs: every pair of hosts serving the same manual (30)."
        )
        lines += report(
            "docs-mirrors (real manuals)", note, evaluate(run, docs_truth(topology)), scan_s
        )
    else:
        print(
            "bench/out/docs-mirrors is absent: build it with bench/docs_crawl.py", file=sys.stderr
        )

    from neardup.synth import generate_demo_crawl

    synth = OUT / "synth-collections"
    crawl = generate_demo_crawl(synth / "crawl", n_docs=250, seed=0)
    scan_s = scan(crawl.warc_paths, synth / "run")
    note = (
        "Topology: neardup.synth demo crawl, 250 documents: primary, full mirror (other "
        "template), stale copy (30 % of pages edited), partial mirror (40 % of pages missing, "
        "other prefix), a `www.` alias with 10 identical pages, exact copies under /latest/, "
        f"excerpts and unrelated hosts; {crawl.warc_records:,} WARC records."
    )
    lines += report(
        "synthetic demo crawl", note, evaluate(synth / "run", synth_truth(crawl.topology)), scan_s
    )
    (OUT / "collections.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
