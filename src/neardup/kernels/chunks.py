"""Chunk fingerprints of Shivakumar & Garcia-Molina (1998).

A page is cut into chunks and every chunk gets one 64-bit fingerprint; two pages overlap
when they share at least T distinct chunks. The chunkings (`Settings.chunking`):

- `lines4`, `lines2`: groups of 4 (or 2) consecutive non-empty lines, not overlapping, the
  last group possibly shorter (so a page of fewer lines still has one chunk);
- `sentences`: one chunk per sentence, a sentence ending at `.`, `!` or `?` followed by white
  space, or at the end of a line (the extracted text keeps one line per HTML block, so a
  list item or a heading is a sentence of its own);
- `paragraphs`: runs of non-empty lines separated by empty ones (resiliparse's
  `preserve_formatting` puts a blank line between HTML blocks);
- `document`: one chunk for the whole page (the paper's "entire document" fingerprint).

A line is empty when it has no word left after canonicalisation (Broder's canonical form:
lower case, words only), so markup-only or punctuation-only lines never make a chunk and
formatting differences inside a line do not change its fingerprint. A chunk's fingerprint
hashes the token hashes of its lines in order, seeded with `Settings.seed`.

Everything runs in two numba kernels over the packed UTF-8 (piece boundaries on the raw
bytes, then fingerprints on the canonical pieces); no Python string per line or chunk.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from neardup.kernels.hashing import TAG_TOKEN, U64, combine, derive_seed, derive_seeds, finish
from neardup.kernels.jit import njit
from neardup.kernels.params import ChunkParams
from neardup.kernels.shingles import token_hashes
from neardup.kernels.tokens import canonicalize_packed, pack_arrow, pack_texts

TAG_CHUNK = 9
# chunking -> (lines per chunk, 0 for "until a blank line" or the whole page; split
# sentences; close a chunk at an empty line)
_MODES = {
    "lines4": (4, False, False),
    "lines2": (2, False, False),
    "sentences": (1, True, False),
    "paragraphs": (0, False, True),
    "document": (0, False, False),
}


@njit(cache=True)
def _pieces(buf: np.ndarray, offsets: np.ndarray, sentences: bool) -> tuple[np.ndarray, np.ndarray]:
    """Cut every text into lines (and sentences): piece byte offsets, contiguous, each
    piece keeping its terminator; plus the first piece of every text (n + 1)."""
    n_docs = offsets.shape[0] - 1
    out = np.empty(offsets[-1] - offsets[0] + n_docs + 1, dtype=np.int64)
    doc_pieces = np.empty(n_docs + 1, dtype=np.int64)
    k = 0
    for d in range(n_docs):
        s = offsets[d]
        e = offsets[d + 1]
        doc_pieces[d] = k
        out[k] = s
        for i in range(s, e):
            c = buf[i]
            cut = c == 10
            if not cut and sentences and (c == 46 or c == 33 or c == 63):
                if i + 1 >= e:
                    cut = True
                else:
                    nxt = buf[i + 1]
                    cut = nxt == 32 or nxt == 10 or nxt == 9 or nxt == 13
            if cut and i + 1 < e:
                k += 1
                out[k] = i + 1
        k += 1
        out[k] = e  # closes the last piece; the next text starts here too
    doc_pieces[n_docs] = k
    return out[: k + 1], doc_pieces


@njit(cache=True)
def _chunk_kernel(
    cbuf: np.ndarray,
    coffs: np.ndarray,
    doc_pieces: np.ndarray,
    group: int,
    paragraphs: bool,
    capacity: int,
    tseed: np.uint64,
    line_seed: np.uint64,
    chunk_seed: np.uint64,
) -> tuple[np.ndarray, np.ndarray]:
    n_docs = doc_pieces.shape[0] - 1
    tok = np.empty(capacity, dtype=np.uint64)
    out = np.empty(doc_pieces[-1] + 1, dtype=np.uint64)
    out_offsets = np.empty(n_docs + 1, dtype=np.int64)
    o = 0
    for d in range(n_docs):
        out_offsets[d] = o
        start = o
        h = chunk_seed
        count = 0
        for p in range(doc_pieces[d], doc_pieces[d + 1]):
            nt = token_hashes(cbuf, coffs[p], coffs[p + 1], tseed, tok)
            if nt == 0:
                if paragraphs and count > 0:
                    out[o] = finish(h, count)
                    o += 1
                    h = chunk_seed
                    count = 0
                continue
            lh = line_seed
            for t in range(nt):
                lh = combine(lh, tok[t])
            h = combine(h, finish(lh, nt))
            count += 1
            if group > 0 and count == group:
                out[o] = finish(h, count)
                o += 1
                h = chunk_seed
                count = 0
        if count > 0:
            out[o] = finish(h, count)
            o += 1
        # distinct chunks of the page, sorted
        if o - start > 1:
            part = np.sort(out[start:o])
            m = 1
            for i in range(1, part.shape[0]):
                if part[i] != part[m - 1]:
                    part[m] = part[i]
                    m += 1
            out[start : start + m] = part[:m]
            o = start + m
    out_offsets[n_docs] = o
    return out[:o], out_offsets


def chunk_fingerprints_packed(
    buf: np.ndarray, offsets: np.ndarray, settings: ChunkParams
) -> tuple[np.ndarray, np.ndarray]:
    """Distinct chunk fingerprints (sorted uint64) of raw packed texts, flat, with per-text
    offsets (n + 1)."""
    group, sentences, paragraphs = _MODES[settings.chunking]
    piece_offsets, doc_pieces = _pieces(buf, offsets, sentences)
    cbuf, coffs = canonicalize_packed(buf, piece_offsets)
    longest = int(np.max(np.diff(coffs))) if coffs.size > 1 else 0
    seeds = derive_seeds(settings.seed, TAG_CHUNK, 2)
    return _chunk_kernel(
        cbuf,
        coffs,
        doc_pieces,
        group,
        paragraphs,
        longest // 2 + 2,
        derive_seed(settings.seed, TAG_TOKEN),
        U64(seeds[0]),
        U64(seeds[1]),
    )


def chunk_fingerprints_arrow(texts: Any, settings: ChunkParams) -> tuple[np.ndarray, np.ndarray]:
    """`chunk_fingerprints_packed` of an Arrow string column (raw page text)."""
    return chunk_fingerprints_packed(*pack_arrow(texts), settings)


def chunk_fingerprints(text: str, settings: ChunkParams) -> np.ndarray:
    """Sorted distinct chunk fingerprints of one raw text."""
    flat, _ = chunk_fingerprints_packed(*pack_texts([text]), settings)
    return flat
