"""A rewrite-heavy increment for the duplicate index (issue 27): pages of the index's own
corpus sent again with a few words changed, half under their own URL (a re-crawl) and half
under a mirror's host (a copy), so that a batch verifies candidates against stored pages
and re-elects their groups' winners, the work the Spark add sends to its executors.

    .venv/bin/python bench/rewrite_increment.py bench/out/scale/web-1000000.jsonl mix.jsonl \\
        [--pages 10000] [--among 990000] [--changed 0.02] [--seed 7]

`--among`: the first pages of the corpus to pick from (those an index of it holds).
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=Path, help="JSONL pages (url, text)")
    parser.add_argument("out", type=Path)
    parser.add_argument("--pages", type=int, default=10_000)
    parser.add_argument("--among", type=int, default=990_000)
    parser.add_argument("--changed", type=float, default=0.02, help="share of words changed")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    pick = set(rng.sample(range(args.among), args.pages))
    with open(args.corpus, encoding="utf-8") as src, open(args.out, "w", encoding="utf-8") as out:
        for i, line in enumerate(src):
            if i >= args.among:
                break
            if i not in pick:
                continue
            row = json.loads(line)
            words = row["text"].split()
            for j in rng.sample(range(len(words)), max(1, int(len(words) * args.changed))):
                words[j] = f"edit{j}"
            row["text"] = " ".join(words)
            if i % 2:  # a mirror's copy: another host
                row["url"] = row["url"].replace("://", "://mirror.", 1)
            out.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
