"""Single-core sketching speed: neardup against datasketch and rensa, side by side.

The same pages for everyone: the HTML of the Debian documentation packages in
../shared/data/docs/*.tar.xz, converted to text once with resiliparse before any timing.
K = 128 min-hashes, 5-word shingles, one core (NUMBA_NUM_THREADS=1, RAYON_NUM_THREADS=1).
Each method runs once untimed (numba JIT and cache loading, allocator warm-up), then
`--repeat` timed runs over all pages (more for methods that take under a second, so every
method is timed for at least about 2 s), interleaved so a noisy neighbour slows all of them
alike. Rates are per CPU-second of the process (the best run's user+system time): on a
shared machine the wall clock also counts time the process waited for a core, which is
noise; wall-clock rates are in their own column, and CPU/wall would exceed 1 if anything
ran on a second core.

Three modes:

- from text: raw page text in, signatures out. neardup canonicalises (its kernel) and calls
  `sketch_batch` on batches of 1000 pages, as the scan does; the peers get the *same* token
  stream (`canonicalize(text).split()`, so they use neardup's fast canonicaliser) and build
  the 5-word shingle strings in Python, as their documentation shows, then hash them.
  `sketch_texts` canonicalises and sketches in one pass over packed UTF-8 without building
  the canonical strings; `sketch_arrow` starts from an Arrow string column, as a Parquet
  reader delivers it, with no Python string per page at all.
- hash only: the peers' shingle lists are prebuilt (outside the timing), neardup starts from
  prebuilt canonical text; what remains is each library's own kernel. neardup's kernel still
  tokenises, hashes and de-duplicates the shingles and computes the fingerprints and
  super-shingles; the peers' does less.
- min-hash only: every library gets each page's distinct shingles as prebuilt uint64
  fingerprints (one flat array plus offsets, or one array per page) through its bulk API,
  so only the min-hash step is timed: neardup's one-permutation sketch (`oph_packed`, the
  default) and its K independent functions per shingle (`minhash_packed`, classic) against
  rensa's RMinHash (which since 0.5 is a bucketed one-pass sketch, not K functions) and
  CMinHash. datasketch has no pre-hashed input and is left out.

neardup runs every mode with both sketches (`Settings.sketch` "oph" and "classic"); the last
column compares each row with neardup's classic sketch in the same mode. "M shingles/s"
counts the distinct shingles of every page (what the min-hash step sees). The peers are the
`bench` extra; without them (or with --no-peers) only neardup's rows run.

Usage: .venv/bin/python bench/sketch_speed.py [--limit N] [--repeat R] [--no-peers]
Writes the table to bench/out/sketch_speed.md.
"""

from __future__ import annotations

import os

for _var in ("NUMBA_NUM_THREADS", "RAYON_NUM_THREADS", "OMP_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse  # noqa: E402
import glob  # noqa: E402
import platform  # noqa: E402
import tarfile  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from importlib.metadata import version  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

from neardup.config import Settings  # noqa: E402
from neardup.kernels import (  # noqa: E402
    canonicalize,
    minhash_packed,
    sketch_arrow,
    sketch_batch,
    sketch_texts,
)
from neardup.kernels.oph import oph_packed  # noqa: E402
from neardup.kernels.shingles import packed_shingles  # noqa: E402
from neardup.kernels.tokens import pack_texts  # noqa: E402

ROOT = Path(__file__).resolve().parent
DATA = ROOT.parent.parent / "shared" / "data" / "docs"
OUT = ROOT / "out" / "sketch_speed.md"
K = 128
W = 5
SEED = 1
BATCH = 1000


def load_pages(limit: int | None) -> list[str]:
    """Plain text of every HTML page of the documentation tarballs (untimed)."""
    from resiliparse.extract.html2text import extract_plain_text

    texts: list[str] = []
    for path in sorted(glob.glob(str(DATA / "*.tar.xz"))):
        with tarfile.open(path) as tar:
            for member in tar:
                if member.isfile() and member.name.lower().endswith((".html", ".htm")):
                    raw = tar.extractfile(member)
                    if raw is None:
                        continue
                    html = raw.read().decode("utf-8", "replace")
                    texts.append(extract_plain_text(html))
                    if limit and len(texts) >= limit:
                        return texts
    return texts


def shingle_strings(text: str) -> list[str]:
    """The peers' shingles: 5 consecutive canonical words joined by spaces (a short text is
    one shingle, as in neardup)."""
    words = canonicalize(text).split()
    if len(words) <= W:
        return [" ".join(words)] if words else []
    return [" ".join(words[i : i + W]) for i in range(len(words) - W + 1)]


@dataclass
class Result:
    method: str
    mode: str
    wall: float
    cpu: float


def best_of(fn: Callable[[], object], repeat: int) -> tuple[float, float]:
    best = (float("inf"), 0.0)
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        if wall < best[0]:
            best = (wall, cpu)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=None, help="use the first N pages")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--no-peers", action="store_true", help="neardup's rows only")
    args = parser.parse_args()

    try:
        if args.no_peers:
            raise ImportError("--no-peers")
        import datasketch
        import rensa
    except ImportError as err:  # the peers are the `bench` extra; neardup's rows need neither
        print(f"peers left out ({err}); install the `bench` extra to compare with them")
        datasketch = rensa = None

    pages = load_pages(args.limit)
    n = len(pages)
    mb = sum(len(p.encode("utf-8")) for p in pages) / 1e6
    oph = Settings(num_perm=K, shingle_size=W, seed=SEED)
    classic = oph.replace(sketch="classic")
    canonical = [canonicalize(p) for p in pages]
    shingles = [shingle_strings(p) for p in pages]
    shingle_bytes = [[s.encode("utf-8") for s in doc] for doc in shingles]
    flat, offsets = packed_shingles(*pack_texts(canonical), oph, unique=True)
    n_shingles = int(flat.size)  # distinct shingles per page, summed: what min-hash sees
    per_page = [flat[offsets[i] : offsets[i + 1]] for i in range(n)]
    offsets_u64 = offsets.astype(np.uint64)

    def nd_text(settings: Settings) -> Callable[[], None]:
        def run() -> None:
            for i in range(0, n, BATCH):
                sketch_batch([canonicalize(t) for t in pages[i : i + BATCH]], settings)

        return run

    def nd_fused(settings: Settings) -> Callable[[], None]:
        def run() -> None:
            for i in range(0, n, BATCH):
                sketch_texts(pages[i : i + BATCH], settings)

        return run

    import pyarrow as pa

    column = pa.array(pages)  # what a Parquet reader hands over

    def nd_arrow(settings: Settings) -> Callable[[], None]:
        def run() -> None:
            for i in range(0, n, BATCH):
                sketch_arrow(column.slice(i, BATCH), settings)

        return run

    def nd_kernel(settings: Settings) -> Callable[[], None]:
        def run() -> None:
            for i in range(0, n, BATCH):
                sketch_batch(canonical[i : i + BATCH], settings)

        return run

    def ds(docs: list[list[bytes]]) -> None:
        for doc in docs:
            m = datasketch.MinHash(num_perm=K, seed=SEED)
            m.update_batch(doc)
            m.digest()

    def ds_text() -> None:
        for p in pages:
            m = datasketch.MinHash(num_perm=K, seed=SEED)
            m.update_batch([s.encode("utf-8") for s in shingle_strings(p)])
            m.digest()

    def rensa_run(cls: type, docs: list[list[str]]) -> None:
        for doc in docs:
            m = cls(num_perm=K, seed=SEED)
            m.update(doc)
            m.digest()

    def rensa_text(cls: type) -> None:
        for p in pages:
            m = cls(num_perm=K, seed=SEED)
            m.update(shingle_strings(p))
            m.digest()

    methods: list[tuple[str, str, Callable[[], None]]] = [
        ("neardup canonicalize + sketch_batch, oph", "from text", nd_text(oph)),
        ("neardup canonicalize + sketch_batch, classic", "from text", nd_text(classic)),
        ("neardup sketch_texts (fused), oph", "from text", nd_fused(oph)),
        ("neardup sketch_texts (fused), classic", "from text", nd_fused(classic)),
        ("neardup sketch_arrow (Arrow column), oph", "from text", nd_arrow(oph)),
        ("neardup sketch_arrow (Arrow column), classic", "from text", nd_arrow(classic)),
    ]
    if rensa is not None:
        methods += [
            ("rensa RMinHash", "from text", lambda: rensa_text(rensa.RMinHash)),
            ("datasketch MinHash", "from text", ds_text),
        ]
        if hasattr(rensa, "CMinHash"):
            methods.append(("rensa CMinHash", "from text", lambda: rensa_text(rensa.CMinHash)))
    methods += [
        ("neardup sketch_batch, oph", "hash only", nd_kernel(oph)),
        ("neardup sketch_batch, classic", "hash only", nd_kernel(classic)),
    ]
    if rensa is not None:
        methods += [
            ("rensa RMinHash", "hash only", lambda: rensa_run(rensa.RMinHash, shingles)),
            ("datasketch MinHash", "hash only", lambda: ds(shingle_bytes)),
        ]
        if hasattr(rensa, "CMinHash"):
            methods.append(
                ("rensa CMinHash", "hash only", lambda: rensa_run(rensa.CMinHash, shingles))
            )
    methods += [
        ("neardup oph_packed", "min-hash only", lambda: oph_packed(flat, offsets, SEED, K)),
        (
            "neardup minhash_packed (classic)",
            "min-hash only",
            lambda: minhash_packed(flat, offsets, SEED, K),
        ),
    ]
    if rensa is not None:
        methods.append(
            (
                "rensa RMinHash",
                "min-hash only",
                lambda: rensa.RMinHash.digest_matrix_from_flat_token_hashes(
                    flat, offsets_u64, K, SEED
                ),
            )
        )
        if hasattr(rensa, "CMinHash"):
            methods.append(
                (
                    "rensa CMinHash",
                    "min-hash only",
                    lambda: rensa.CMinHash.digests64_from_token_hash_sets(per_page, K, SEED),
                )
            )

    # Warm-up, untimed: numba JIT / cache load, first-touch of buffers, imports.
    warm = pages[: min(n, 300)]
    for settings in (oph, classic):
        sketch_batch([canonicalize(t) for t in warm], settings)
        sketch_texts(warm, settings)
    for _, _, fn in methods:
        if fn is not ds_text:
            fn()  # one full untimed pass (datasketch is slow; it skips this)

    results = {
        (name, mode): Result(name, mode, float("inf"), float("inf")) for name, mode, _ in methods
    }
    rounds: dict[tuple[str, str], int] = {}
    for _ in range(args.repeat):  # interleaved
        for name, mode, fn in methods:
            r = results[(name, mode)]
            for _ in range(rounds.get((name, mode), 1)):
                wall, cpu = best_of(fn, 1)
                r.wall, r.cpu = min(r.wall, wall), min(r.cpu, cpu)
            rounds[(name, mode)] = max(1, min(20, round(2.0 / args.repeat / max(wall, 1e-3))))

    ref = {
        "from text": results[("neardup sketch_texts (fused), classic", "from text")].cpu,
        "hash only": results[("neardup sketch_batch, classic", "hash only")].cpu,
        "min-hash only": results[("neardup minhash_packed (classic)", "min-hash only")].cpu,
    }
    peers = (
        f"datasketch {version('datasketch')}, rensa {version('rensa')}"
        if rensa is not None
        else "peers not installed"
    )
    lines = [
        f"# Sketching speed, one core: {n:,} pages, {mb:.1f} MB of text, "
        f"{n_shingles:,} distinct shingles (summed per page), K={K}, w={W}",
        "",
        f"{platform.processor() or platform.machine()}, {_cpu_name()}; Python "
        f"{platform.python_version()}, numpy {np.__version__}, numba {version('numba')}, "
        f"{peers}. Best of at least {args.repeat} interleaved runs, per CPU-second of one "
        "core; numba JIT warm-up excluded (one untimed pass per method first). MB/s counts the "
        "raw page text for every row; M shingles/s the distinct shingles of every page.",
        "",
        "| method | mode | pages/s | MB/s | M shingles/s | us/page | pages/s (wall) | CPU/wall "
        "| vs neardup classic |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, mode, _ in methods:
        r = results[(name, mode)]
        lines.append(
            f"| {name} | {mode} | {n / r.cpu:,.0f} | {mb / r.cpu:,.1f} | "
            f"{n_shingles / r.cpu / 1e6:,.1f} | {r.cpu / n * 1e6:,.1f} | {n / r.wall:,.0f} | "
            f"{r.cpu / r.wall:.2f} | {ref[mode] / r.cpu:.2f}x |"
        )
    table = "\n".join(lines) + "\n"
    print(table)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(table)
    print(f"written to {OUT}")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip() + f" ({os.cpu_count()} CPUs visible)"
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    main()
