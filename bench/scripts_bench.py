"""Tokens for every script: recall and wrong merges on real Chinese, Japanese and Thai text,
the tokenizer of the last commit against the working tree's, and canonicalisation speed.

The planted sets are tests/script_texts.py's (Django's translations, paragraphs of about 400
characters, 2 or 3 copies of two paragraphs in three with 3 to 8 characters changed), one
set per seed, each scanned with default settings from a JSONL file. A pair's truth is the
exact Jaccard of its character 5-grams: "chars" counts a base with its combining marks as
one character, as a reader does (and as the tokens do); "code points" counts each code
point (the two agree for Chinese and Japanese). Recall: the share of pairs at J >= 0.9 that
the scan puts in one cluster. Wrong merges: pairs in one cluster whose J is below 0.5.

The old tokenizer is `git show HEAD:src/neardup/kernels/tokens.py` loaded as a module of
its own and swapped in for `canonicalize` and `canonicalize_packed` wherever the package
imported them (the scan runs in this process with workers=1); without git or with an
unchanged HEAD only the new figures are printed.

Speed: `canonicalize_packed` over English text (the standard library's documentation,
`neardup.synth.stdlib_documents`, about 20 MB) and over the Chinese messages, per
CPU-second, best of 10 interleaved runs.

Usage: .venv/bin/python bench/scripts_bench.py [--seeds 5]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import itertools
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pyarrow.parquet as pq

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from script_texts import LANGUAGES, char_grams, jaccard, messages, planted_pages  # noqa: E402

import neardup  # noqa: E402
from neardup.kernels import tokens as new_tokens  # noqa: E402


def old_tokens() -> ModuleType | None:
    """The committed tokenizer as a module of its own, or None when unavailable/unchanged."""
    try:
        source = subprocess.run(
            ["git", "show", "HEAD:src/neardup/kernels/tokens.py"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    if source == (ROOT / "src/neardup/kernels/tokens.py").read_text():
        return None
    path = Path(tempfile.mkdtemp()) / "old_tokens.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("old_tokens", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextlib.contextmanager
def tokenizer(module: ModuleType) -> Iterator[None]:
    """Swap `module`'s canonicalize functions in for the package's, everywhere imported."""
    originals = {n: getattr(new_tokens, n) for n in ("canonicalize", "canonicalize_packed")}
    swapped = []
    for mod in list(sys.modules.values()):
        if not (getattr(mod, "__name__", "") or "").startswith("neardup"):
            continue
        for name, original in originals.items():
            if getattr(mod, name, None) is original:
                swapped.append((mod, name))
                setattr(mod, name, getattr(module, name))
    try:
        yield
    finally:
        for mod, name in swapped:
            setattr(mod, name, originals[name])


def measure(seeds: int) -> dict[tuple[str, str], list[int]]:
    """(language, truth) -> [pairs at J >= 0.9, found, wrong merges] for the tokenizer in use."""
    totals: dict[tuple[str, str], list[int]] = {}
    for seed in range(seeds):
        pages = [p for lang in LANGUAGES for p in planted_pages(lang, seed=seed)]
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "pages.jsonl"
            with path.open("w", encoding="utf-8") as fh:
                for p in pages:
                    fh.write(json.dumps({"url": p.url, "text": p.text}, ensure_ascii=False))
                    fh.write("\n")
            run = neardup.scan([path], Path(tmp) / "run", workers=1)
            rows = pq.read_table(run.path / "pages.parquet", columns=["url", "cluster_id"])
            cluster = {r["url"]: r["cluster_id"] for r in rows.to_pylist()}
        for lang in LANGUAGES:
            mine = [p for p in pages if p.url.startswith(f"https://{lang}")]
            for truth, code_points in (("chars", False), ("code points", True)):
                grams = {p.url: char_grams(p.text, code_points=code_points) for p in mine}
                t = totals.setdefault((lang, truth), [0, 0, 0])
                for a, b in itertools.combinations(mine, 2):
                    j = jaccard(grams[a.url], grams[b.url])
                    same = cluster[a.url] is not None and cluster[a.url] == cluster[b.url]
                    if j >= 0.9:
                        t[0] += 1
                        t[1] += same
                    if same and j < 0.5:
                        t[2] += 1
    return totals


def speeds(modules: list[ModuleType], texts: list[str], repeat: int = 10) -> list[float]:
    """MB of UTF-8 per CPU-second through each module's `canonicalize_packed`: the best of
    `repeat` runs, interleaved so a busy neighbour slows every module alike."""
    packed = [m.pack_texts(texts) for m in modules]
    for m, (buf, offsets) in zip(modules, packed, strict=True):
        m.canonicalize_packed(buf, offsets)  # compile, build the table
    best = [float("inf")] * len(modules)
    for _ in range(repeat):
        for k, (m, (buf, offsets)) in enumerate(zip(modules, packed, strict=True)):
            start = time.process_time()
            m.canonicalize_packed(buf, offsets)
            best[k] = min(best[k], time.process_time() - start)
    return [int(packed[0][1][-1]) / b / 1e6 for b in best]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    args = parser.parse_args()
    old = old_tokens()
    results = {"new": measure(args.seeds)}
    if old is not None:
        with tokenizer(old):
            results["old"] = measure(args.seeds)
    tokenizers = [t for t in ("old", "new") if t in results]
    print(f"{args.seeds} planted sets per language, default settings (threshold 0.8)\n")
    print(
        "| language | truth | pairs at J >= 0.9 | "
        + " | ".join(f"recall {t} | wrong merges {t}" for t in tokenizers)
        + " |"
    )
    print("|---|---|---:|" + "---:|---:|" * len(tokenizers))
    for (lang, truth), (n, *_) in results["new"].items():
        cells = []
        for t in tokenizers:
            _, found, wrong = results[t][(lang, truth)]
            cells += [f"{found / n:.2f}" if n else "-", str(wrong)]
        print(f"| {lang} | {truth} | {n} | " + " | ".join(cells) + " |")
    from neardup.synth import stdlib_documents

    english = [" ".join(d.words) for d in stdlib_documents(min_words=50)]
    english = english * 15  # about 20 MB
    chinese = [" ".join(messages("zh"))] * 300
    print("\n| canonicalize_packed, MB per CPU-second | " + " | ".join(tokenizers) + " |")
    print("|---|" + "---:|" * len(tokenizers))
    mods = [old if t == "old" else new_tokens for t in tokenizers]
    for name, texts in (("English (stdlib docs)", english), ("Chinese (Django)", chinese)):
        rates = speeds(mods, texts)  # type: ignore[arg-type]
        print(f"| {name} | " + " | ".join(f"{r:.0f}" for r in rates) + " |")


if __name__ == "__main__":
    main()
