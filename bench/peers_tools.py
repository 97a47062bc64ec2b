"""One peer's near-duplicate run on docs.jsonl, inside the peers' venv (bench/out/peers-venv).

Run by bench/peers.py as a child process, so its wall time, CPU time and peak memory are the
tool's own and the peers' dependencies never meet the project's. Each tool is used the way
its documentation shows, at threshold 0.8 with 128 permutations and 5-word shingles:

  datasketch  MinHash.update_batch over the shingles, MinHashLSH(threshold=0.8, num_perm=128),
              insert all, query each; the LSH answer is the result (no verification step).
  rensa       RMinHash(num_perm=128).update(shingles), RMinHashLSH(0.8, 128, num_bands=16),
              insert all, query each, keep candidates whose RMinHash.jaccard >= 0.8.
  text-dedup  `python -m text_dedup.minhash` with a config.toml (its 0.4 interface):
              local JSON file, ngram_size 5, num_perm 128, threshold 0.8, all cores.
  datatrove   MinhashDedupSignature -> Buckets -> Cluster -> Filter, each stage a
              LocalPipelineExecutor, MinhashConfig(n_grams=5, 16 buckets x 8 hashes).

Output in WORKDIR/result.npz: `removed` (ids a tool drops) and, for tools that give pairs,
`pairs` (i < j). Phase times go to WORKDIR/phases.json.

    peers-venv/bin/python bench/peers_tools.py TOOL DOCS.jsonl WORKDIR [--workers N]
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np

THRESHOLD = 0.8
NUM_PERM = 128
NGRAM = 5
_NON_ALNUM = re.compile(r"\W+")


def read_docs(path: Path) -> Iterator[tuple[int, str]]:
    """(id, text) of every JSONL row."""
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            yield int(row["id"]), row["text"]


def shingle_strings(text: str) -> list[str]:
    """5-word shingles of lower-cased alphanumeric words, built in Python as the peers' docs do."""
    words = [w for w in _NON_ALNUM.split(text.lower()) if w]
    if len(words) <= NGRAM:
        return [" ".join(words)]
    return [" ".join(words[i : i + NGRAM]) for i in range(len(words) - NGRAM + 1)]


def removed_from_pairs(n: int, pairs: np.ndarray) -> np.ndarray:
    """Ids dropped when each connected component keeps its lowest id (union-find)."""
    parent = list(range(n))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in pairs.tolist():
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    return np.asarray([i for i in range(n) if find(i) != i], dtype=np.int64)


def _pairs_array(pairs: set[tuple[int, int]]) -> np.ndarray:
    return np.asarray(sorted(pairs), dtype=np.int64).reshape(-1, 2)


def run_datasketch(docs: Path, work: Path, workers: int) -> dict[str, float]:
    from datasketch import MinHash, MinHashLSH

    t0 = time.perf_counter()
    sigs = []
    for _, text in read_docs(docs):
        m = MinHash(num_perm=NUM_PERM)
        m.update_batch([s.encode("utf-8") for s in shingle_strings(text)])
        sigs.append(m)
    t1 = time.perf_counter()
    lsh = MinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM)
    for i, m in enumerate(sigs):
        lsh.insert(i, m)
    pairs = {(min(i, j), max(i, j)) for i, m in enumerate(sigs) for j in lsh.query(m) if j != i}
    t2 = time.perf_counter()
    arr = _pairs_array(pairs)
    np.savez(work / "result.npz", pairs=arr, removed=removed_from_pairs(len(sigs), arr))
    return {"sketch": t1 - t0, "lsh": t2 - t1}


def run_rensa(docs: Path, work: Path, workers: int) -> dict[str, float]:
    from rensa import RMinHash, RMinHashLSH

    t0 = time.perf_counter()
    sigs = []
    for _, text in read_docs(docs):
        m = RMinHash(num_perm=NUM_PERM, seed=42)
        m.update(shingle_strings(text))
        sigs.append(m)
    t1 = time.perf_counter()
    lsh = RMinHashLSH(threshold=THRESHOLD, num_perm=NUM_PERM, num_bands=16)
    for i, m in enumerate(sigs):
        lsh.insert(i, m)
    pairs = {
        (min(i, j), max(i, j))
        for i, m in enumerate(sigs)
        for j in lsh.query(m)
        if j != i and m.jaccard(sigs[j]) >= THRESHOLD
    }
    t2 = time.perf_counter()
    arr = _pairs_array(pairs)
    np.savez(work / "result.npz", pairs=arr, removed=removed_from_pairs(len(sigs), arr))
    return {"sketch": t1 - t0, "lsh+verify": t2 - t1}


TEXT_DEDUP_CONFIG = """\
[input]
input_type = "local_files"
file_type = "json"

[input.read_arguments]
path = "json"
data_files = "{docs}"
split = "train"
cache_dir = "{cache}"

[algorithm]
algorithm_name = "minhash"
text_column = "text"
num_perm = {num_perm}
ngram_size = {ngram}
threshold = {threshold}
num_proc = {workers}
seed = 42

[output]
output_dir = "{out}"
save_clusters = true
keep_index_column = true
clean_cache = true

[debug]
logging_level = 20
"""


def run_text_dedup(docs: Path, work: Path, workers: int) -> dict[str, float]:
    import pickle

    config = TEXT_DEDUP_CONFIG.format(
        docs=docs.resolve(),
        cache=(work / "hf-cache").resolve(),
        num_perm=NUM_PERM,
        ngram=NGRAM,
        threshold=THRESHOLD,
        workers=workers,
        out=(work / "output").resolve(),
    )
    (work / "config.toml").write_text(config, encoding="utf-8")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "text_dedup.minhash"], cwd=work, check=True)
    t1 = time.perf_counter()
    with (work / "output" / "clusters.pickle").open("rb") as fh:
        clusters: dict[int, int] = pickle.load(fh)
    removed = np.asarray(sorted(i for i, c in clusters.items() if c != i), dtype=np.int64)
    np.savez(work / "result.npz", removed=removed)
    return {"text_dedup.minhash": t1 - t0}


def run_datatrove(docs: Path, work: Path, workers: int) -> dict[str, float]:
    from datatrove.executor import LocalPipelineExecutor
    from datatrove.pipeline.dedup import (
        MinhashConfig,
        MinhashDedupBuckets,
        MinhashDedupCluster,
        MinhashDedupFilter,
        MinhashDedupSignature,
    )
    from datatrove.pipeline.readers import JsonlReader
    from datatrove.pipeline.writers import JsonlWriter
    from datatrove.utils.hashing import HashConfig

    # One input file would give one task; the shards (made before timing) let every core read.
    shards = sorted((docs.parent / "shards").glob("*.jsonl"))
    in_dir = str(shards[0].parent) if shards else str(docs.parent)
    pattern = "*.jsonl" if shards else docs.name
    tasks = max(len(shards), 1)
    config = MinhashConfig(
        n_grams=NGRAM, num_buckets=16, hashes_per_bucket=8, hash_config=HashConfig(precision=64)
    )
    w = str(work)

    def reader() -> JsonlReader:
        return JsonlReader(in_dir, glob_pattern=pattern, id_key="id", text_key="text")

    times: dict[str, float] = {}
    stages = [
        ("signatures", [reader(), MinhashDedupSignature(f"{w}/sigs", config=config)], tasks),
        ("buckets", [MinhashDedupBuckets(f"{w}/sigs", f"{w}/buckets", config=config)], 16),
        ("cluster", [MinhashDedupCluster(f"{w}/buckets", f"{w}/remove_ids", config=config)], 1),
        (
            "filter",
            [
                reader(),
                MinhashDedupFilter(f"{w}/remove_ids", exclusion_writer=JsonlWriter(f"{w}/removed")),
                JsonlWriter(f"{w}/kept"),
            ],
            tasks,
        ),
    ]
    for name, pipeline, n_tasks in stages:
        t = time.perf_counter()
        LocalPipelineExecutor(
            pipeline=pipeline,
            tasks=n_tasks,
            workers=workers,
            logging_dir=f"{w}/logs/{name}",
        ).run()
        times[name] = time.perf_counter() - t
    import gzip

    removed = []
    for path in sorted((work / "removed").glob("*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as fh:
            removed += [int(json.loads(line)["id"]) for line in fh]
    np.savez(work / "result.npz", removed=np.asarray(sorted(removed), dtype=np.int64))
    return times


TOOLS = {
    "datasketch": run_datasketch,
    "rensa": run_rensa,
    "text-dedup": run_text_dedup,
    "datatrove": run_datatrove,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tool", choices=list(TOOLS))
    parser.add_argument("docs", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    phases = TOOLS[args.tool](args.docs, args.work, args.workers)
    (args.work / "phases.json").write_text(json.dumps(phases, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
