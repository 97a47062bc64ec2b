"""The heavy, stateless half of an update batch: text, sketches and lengths of every page.

Why apart from `apply_batch.py`: parsing HTML and sketching are most of a batch's cost and need
nothing of the index, so they run before the index lock is taken (a `/check` or a `/status`
is never held behind another client's sketching), and they run for the whole batch in one
kernel call (`kernels.sketch_texts`) instead of one call per page, which is what makes an
insert rate of thousands of pages a second possible. `compute_batch` then only looks up
and changes state.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from neardup.config import Settings
from neardup.index.state.lengths import dim_lengths_packed
from neardup.index.state.updates import PageUpdate, ServiceError, html_to_text
from neardup.ingest.eligibility import rule_of
from neardup.kernels import canonicalize_packed, fingerprint64, pack_texts, sketch_packed
from neardup.pipeline.char_table_cache import prime_char_table
from neardup.pipeline.steps.near_pairs import url_key


@dataclass(frozen=True)
class PageSketch:
    """What the index needs of one page's content: its sketch and the numbers beside it."""

    signature: np.ndarray  # the min-hash row (SIGNATURE_DTYPE)
    n_shingles: int  # distinct shingles (0: nothing to compare)
    shingle_fp: int  # shingle-set fingerprint: equal sets, equal values
    n_tokens: int  # words of the canonical text
    exact_fp: int  # fingerprint of the text as given
    lengths: np.ndarray  # the tier-2 length vector (dims int32)
    key: int  # the page key (URL hash) the scan breaks ties on


@dataclass
class PreparedBatch:
    """A batch keyed by URL (the last entry for a URL wins) with the sketch of each page
    that carries content; `skipped` holds the URLs the eligibility rule leaves out, with
    the reason, which are not in `updates`."""

    updates: dict[str, PageUpdate]
    sketches: dict[str, PageSketch]
    skipped: dict[str, str] = field(default_factory=dict)

    @classmethod
    def joined(cls, batches: list[PreparedBatch]) -> PreparedBatch:
        """Batches prepared one after the other as one batch, as if their pages had come
        in one: the last entry for a URL wins, whether an update (with its sketch, or
        none) or a skip."""
        if len(batches) == 1:
            return batches[0]
        out = cls({}, {}, {})
        for b in batches:
            for url, u in b.updates.items():
                out.updates[url] = u
                out.sketches.pop(url, None)
                out.skipped.pop(url, None)
            out.sketches.update(b.sketches)
            for url, reason in b.skipped.items():
                out.updates.pop(url, None)
                out.sketches.pop(url, None)
                out.skipped[url] = reason
        return out


def prepare_batch(
    updates: Iterable[PageUpdate], settings: Settings, dims: int, by_url: bool = False
) -> PreparedBatch:
    """Key the batch by URL, turn HTML into text, and sketch every content page at once.

    With `by_url` (a batch of pages to store: `ServiceIndex.apply`, `neardup add`), leave
    out the pages the scan would not compare by their URL (`Eligibility.url_reason`:
    crawler files, URL patterns; a removal always passes); without, every update is
    sketched (a text to look up, whose key is no page's URL)."""
    # The tokenizer's character table from the scan's disk cache (10 ms), not built anew
    # in each process (0.4 s: a tenth of a 1 % `neardup add` of a million pages).
    prime_char_table()
    rule = rule_of(settings) if by_url else None
    batch: dict[str, PageUpdate] = {}
    skipped: dict[str, str] = {}
    for u in updates:
        if not u.url:
            raise ServiceError("an update needs a url")
        reason = None if u.remove or rule is None else rule.url_reason(u.url)
        if reason is None:
            batch[u.url] = u
            skipped.pop(u.url, None)
        else:
            skipped[u.url] = reason
            batch.pop(u.url, None)
    urls: list[str] = []
    texts: list[str] = []
    for url, u in batch.items():
        if u.remove or u.redirect_to:
            continue
        if u.text is not None:
            texts.append(u.text)
        elif u.html is not None:
            texts.append(html_to_text(u.html, url))
        else:
            continue
        urls.append(url)
    sketches: dict[str, PageSketch] = {}
    if urls:
        raw, bounds = pack_texts(texts)  # the texts' UTF-8, once: the exact fingerprints
        canonical = canonicalize_packed(raw, bounds)  # once, for both kernels
        sk = sketch_packed(*canonical, settings)
        lens = dim_lengths_packed(*canonical, dims, settings.seed)
        n_tokens = sk.n_tokens.tolist()
        n_shingles = sk.n_shingles.tolist()
        shingle_fp = sk.shingle_fp.tolist()
        data, ends = memoryview(raw), bounds.tolist()
        for i, url in enumerate(urls):
            sketches[url] = PageSketch(
                signature=sk.minhash[i].copy(),
                n_shingles=n_shingles[i],
                shingle_fp=shingle_fp[i],
                n_tokens=n_tokens[i],
                exact_fp=fingerprint64(data[ends[i] : ends[i + 1]]),
                lengths=lens[i],
                key=url_key(url),
            )
    return PreparedBatch(batch, sketches, skipped)
