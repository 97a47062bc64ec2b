"""Web-like text at scale: millions of JSONL pages drawn from a Zipf vocabulary of real pages.

Benchmarks of throughput and memory (issues 15, 16 and 19) need corpora far larger than any
crawl we can ship, whose shingle statistics still look like the web's: word frequencies with
a heavy head and a long tail, not uniform random words. The vocabulary and its frequencies
are those of real running text (the standard library's documentation, `corpus.py`, offline on
every machine); each page is `words` words drawn independently from that distribution, and a
share of pages are *planted copies*: an earlier page with a few words replaced, so that their
5-shingle Jaccard to the original is about 0.8–0.98 and a detector has something to find.

Pages are produced in blocks of 10,000 with one generator per block, seeded by the block's
position, so the same arguments always give the same bytes, a file of any size is written in
bounded memory, and a large corpus can be written as shards in parallel (`first`): the shard
of pages `first .. first + pages` is byte for byte that slice of one file of all the pages.
"""

from __future__ import annotations

import contextlib
import functools
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from neardup.synth.corpus import stdlib_documents

_BLOCK = 10_000


@dataclass(frozen=True)
class WebPage:
    """One generated page; `copy_of` is the URL of the page it was planted from, if any."""

    url: str
    text: str
    copy_of: str | None


@functools.cache
def _vocabulary() -> tuple[np.ndarray, np.ndarray]:
    """The words of real pages and the cumulative share of each, most frequent first."""
    counts: Counter[str] = Counter()
    for doc in stdlib_documents():
        counts.update(doc.words)
    ranked = counts.most_common()
    words = np.array([w for w, _ in ranked], dtype=object)
    freq = np.array([c for _, c in ranked], dtype=np.float64)
    return words, np.cumsum(freq) / freq.sum()


def _url(i: int) -> str:
    # a few thousand hosts, each with many paths, like a broad crawl
    return f"https://site{i % 4099}.example/page/{i}"


def iter_webtext(
    pages: int,
    words: int = 400,
    copies: float = 0.1,
    seed: int = 0,
    max_edits: int = 6,
    first: int = 0,
) -> Iterator[WebPage]:
    """Yield `pages` pages, numbered from `first` (a multiple of the block size, 10,000);
    about `copies` of them are copies of an earlier page in the same block with
    1..`max_edits` words replaced (so copies and originals stay within 10,000 pages of each
    other, as re-crawled pages do in a crawl's order)."""
    if first % _BLOCK:
        raise ValueError(f"first must be a multiple of {_BLOCK}, got {first}")
    vocab, cum = _vocabulary()
    for start in range(first, first + pages, _BLOCK):
        n = min(_BLOCK, first + pages - start)
        rng = np.random.default_rng([seed, start])
        draws = np.searchsorted(cum, rng.random((n, words)), side="right")
        np.minimum(draws, len(vocab) - 1, out=draws)
        is_copy = rng.random(n) < copies
        is_copy[0] = False
        for j in range(n):
            copy_of = None
            if is_copy[j]:
                src = int(rng.integers(0, j))
                row = draws[src].copy()
                k = int(rng.integers(1, max_edits + 1))
                where = rng.choice(words, size=k, replace=False)
                row[where] = np.minimum(
                    np.searchsorted(cum, rng.random(k), side="right"), len(vocab) - 1
                )
                draws[j] = row
                copy_of = _url(start + src)
            yield WebPage(_url(start + j), " ".join(vocab[draws[j]].tolist()), copy_of)


def write_webtext(
    path: str | Path,
    pages: int,
    words: int = 400,
    copies: float = 0.1,
    seed: int = 0,
    truth: str | Path | None = None,
    first: int = 0,
) -> int:
    """Write `pages` pages (numbered from `first`, see `iter_webtext`) to `path` as JSONL
    (`url`, `text`); with `truth`, also a TSV of the planted copies (copy URL, original URL).
    Returns the bytes written."""
    size = 0
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(path, "w", encoding="utf-8"))
        truth_file = (
            None if truth is None else stack.enter_context(open(truth, "w", encoding="utf-8"))
        )
        for page in iter_webtext(pages, words, copies, seed, first=first):
            line = json.dumps({"url": page.url, "text": page.text}, ensure_ascii=False)
            size += out.write(line + "\n")
            if truth_file is not None and page.copy_of is not None:
                truth_file.write(f"{page.url}\t{page.copy_of}\n")
    return size
