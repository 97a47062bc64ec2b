"""Input and ground truth of the peer comparison (bench/peers.py): real text, known duplicates.

Peers and neardup must see the same documents, and precision/recall need a truth that does
not come from any of the tools. So the corpus is built, not found:

1. A pool of real text: the plain text (resiliparse html2text) of the newer release of each
   manual in ../shared/data/docs (via `docs_crawl.docs_pages`) and of every HTML response in
   ../shared/data/warc. Each distinct line is kept once, so navigation repeated on every page
   cannot make two unrelated documents look alike.
2. Base documents are collages of 3-8 windows of 40 consecutive pool words at random offsets,
   wrapped in one of 40 site templates (a header and a footer cut from the pool). Two bases
   share a window with probability ~1e-3 and then have Jaccard < 0.2, so bases are not
   near-duplicates of each other; `check_cross_groups` verifies this by brute force.
3. 70 % of bases stand alone; the rest get 1-3 derived copies, each made by one stated edit
   (`neardup.synth.edits`): an exact copy; `mutate` at 1 % insert + 1 % delete + 1 %
   substitute per word ("light") or 3 % + 3 % + 2 % ("heavy", mostly below 0.8); a boilerplate
   swap to another template; or truncation to 80-95 % of the words.
4. Documents are shuffled, so copies are not adjacent, and numbered 0..N-1 (`id`).

Truth: a *group* is a base and its copies. A truth pair is a pair of one group whose exact
Jaccard of 5-word shingles (neardup's canonical words, all shingles, no sampling) is >= 0.8.
Pairs across groups are not near-duplicates by construction (checked on the 10k input).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT.parent / "src"))

from neardup.synth.edits import mutate, swap_boilerplate, truncate  # noqa: E402

SHARED = ROOT.parent.parent / "shared" / "data"
WINDOW = 40
THRESHOLD = 0.8
EDITS = ("exact", "light", "heavy", "boilerplate", "truncate")
RATES = {"light": (0.01, 0.01, 0.01), "heavy": (0.03, 0.03, 0.02)}  # insert, delete, substitute
N_TEMPLATES = 40


def _html_to_text(html: bytes) -> str:
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    return extract_plain_text(bytes_to_str(html, detect_encoding(html)), main_content=False)


def real_texts() -> Iterator[str]:
    """Plain text of the real pages: the newer manual releases, then the WARC HTML pages."""
    from docs_crawl import MANUALS, docs_pages
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    for manual in MANUALS:
        for _, html in docs_pages(MANUALS[manual][1]):
            yield _html_to_text(html)
    for path in sorted((SHARED / "warc").glob("*.warc*")):
        if path.name.endswith((".wat.gz", ".wet.gz")):
            continue
        with path.open("rb") as fh:
            try:
                for rec in ArchiveIterator(fh, record_types=WarcRecordType.response):
                    if "html" in (rec.http_content_type or "").lower():
                        yield _html_to_text(rec.reader.read())
            except OSError:  # a damaged tail (some samples are cut files): keep what was read
                continue


def word_pool(cache: Path | None = None) -> list[str]:
    """The real words, each distinct line once, in reading order (cached as a text file)."""
    if cache is not None and cache.exists():
        return cache.read_text(encoding="utf-8").split()
    seen: set[str] = set()
    lines: list[str] = []
    for text in real_texts():
        for line in text.splitlines():
            line = " ".join(line.split())
            if len(line.split()) >= 3 and line not in seen:
                seen.add(line)
                lines.append(line)
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        cache.write_text("\n".join(lines), encoding="utf-8")
    return " ".join(lines).split()


@dataclass
class Corpus:
    """Generated documents (in output order) and what each derives from."""

    texts: list[str]
    group: np.ndarray  # group (base) number of each document
    edit: list[str]  # "base" or the edit that made it


def generate(pool: list[str], n_docs: int, seed: int = 0) -> Corpus:
    """`n_docs` documents: bases from pool windows plus their derived copies, shuffled."""
    rng = np.random.default_rng(seed)
    words = np.asarray(pool, dtype=object)
    span = len(words) - WINDOW

    def window(n: int) -> list[str]:
        start = int(rng.integers(0, span))
        return list(words[start : start + n])

    templates = [
        (window(int(rng.integers(6, 16))), window(int(rng.integers(6, 16))))
        for _ in range(N_TEMPLATES)
    ]
    texts: list[str] = []
    groups: list[int] = []
    edits: list[str] = []
    g = 0
    while len(texts) < n_docs:
        t = int(rng.integers(N_TEMPLATES))
        header, footer = templates[t]
        body: list[str] = []
        for _ in range(int(rng.integers(3, 9))):
            body += window(WINDOW)
        base = [*header, *body, *footer]
        texts.append(" ".join(base))
        groups.append(g)
        edits.append("base")
        n_copies = 0 if rng.random() < 0.7 else int(rng.integers(1, 4))
        for _ in range(min(n_copies, n_docs - len(texts))):
            kind = EDITS[int(rng.integers(len(EDITS)))]
            if kind == "exact":
                copy = base
            elif kind in RATES:
                ins, dele, sub = RATES[kind]
                copy = mutate(base, rng, insert_rate=ins, delete_rate=dele, substitute_rate=sub)
            elif kind == "boilerplate":
                other = (t + 1 + int(rng.integers(N_TEMPLATES - 1))) % N_TEMPLATES
                copy = swap_boilerplate(
                    base, *templates[other], strip_header=len(header), strip_footer=len(footer)
                )
            else:
                copy = truncate(base, float(rng.uniform(0.8, 0.95)))
            texts.append(" ".join(copy))
            groups.append(g)
            edits.append(kind)
        g += 1
    order = rng.permutation(len(texts))
    return Corpus([texts[i] for i in order], np.asarray(groups)[order], [edits[i] for i in order])


def _shingle_set(text: str) -> np.ndarray:
    from neardup.kernels import canonicalize, shingle_hashes

    return np.unique(np.asarray(shingle_hashes(canonicalize(text), 5, False, 1)))


def exact_jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """|A ∩ B| / |A ∪ B| of two sorted unique hash arrays (1.0 for two empty sets)."""
    inter = np.intersect1d(a, b, assume_unique=True).size
    union = a.size + b.size - inter
    return inter / union if union else 1.0


def truth_pairs(texts: list[str], group: np.ndarray, threshold: float = THRESHOLD) -> np.ndarray:
    """(i, j), i < j, of every same-group pair with exact 5-shingle Jaccard >= threshold."""
    order = np.argsort(group, kind="stable")
    bounds = np.flatnonzero(np.diff(group[order])) + 1
    out: list[tuple[int, int]] = []
    for members in np.split(order, bounds):
        if members.size < 2:
            continue
        members = np.sort(members)
        sets = [_shingle_set(texts[i]) for i in members]
        for x in range(members.size):
            for y in range(x + 1, members.size):
                if exact_jaccard(sets[x], sets[y]) >= threshold:
                    out.append((int(members[x]), int(members[y])))
    return np.asarray(out, dtype=np.int64).reshape(-1, 2)


def check_cross_groups(texts: list[str], group: np.ndarray, threshold: float = 0.5) -> int:
    """Number of different-group pairs with exact Jaccard >= `threshold`, by brute force."""
    from accuracy import exact_pairs, incidence_matrix

    i, j, _ = exact_pairs(incidence_matrix([_shingle_set(t) for t in texts]), threshold)
    return int(np.count_nonzero(group[i] != group[j]))


def write(corpus: Corpus, out: Path, parquet: bool = True) -> None:
    """docs.jsonl (id, url, text), optionally docs.parquet, and truth.npz (group, edit)."""
    out.mkdir(parents=True, exist_ok=True)
    with (out / "docs.jsonl").open("w", encoding="utf-8") as fh:
        for i, text in enumerate(corpus.texts):
            fh.write(json.dumps({"id": i, "url": f"https://gen.example/{i}", "text": text}) + "\n")
    if parquet:
        import pyarrow as pa
        import pyarrow.parquet as pq

        n = len(corpus.texts)
        table = pa.table(
            {
                "id": pa.array(np.arange(n)),
                "url": [f"https://gen.example/{i}" for i in range(n)],
                "text": corpus.texts,
            }
        )
        pq.write_table(table, out / "docs.parquet")
    np.savez(out / "truth.npz", group=corpus.group, edit=np.asarray(corpus.edit))
