"""A batch sketched at once gives each page what one text alone would give."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.config import Settings
from neardup.index.state.lengths import dim_lengths
from neardup.index.state.prepare import prepare_batch
from neardup.index.state.updates import PageUpdate
from neardup.kernels import fingerprint64, sketch_text


def test_batch_sketches_equal_one_text_at_a_time():
    texts = [
        "héllo wörld, a lone surrogate \ud800 and more words here",
        "",
        "日本語のテキストは空白なしで書かれる",
        " ".join(f"w{i}" for i in range(300)),
    ]
    settings = Settings()
    prepared = prepare_batch(
        [PageUpdate(f"http://a/{i}", text=t) for i, t in enumerate(texts)], settings, 3
    )
    for i, text in enumerate(texts):
        got = prepared.sketches[f"http://a/{i}"]
        one = sketch_text(text, settings)
        assert got.exact_fp == fingerprint64(text.encode("utf-8", "surrogatepass"))
        assert np.array_equal(got.signature, one.minhash)
        assert (got.n_shingles, got.shingle_fp, got.n_tokens) == (
            one.shingles.size,
            one.shingle_fp,
            one.n_tokens,
        )
        assert got.lengths.tolist() == dim_lengths([text], 3, settings.seed)[0].tolist()


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["http://a/1", "http://a/2", "http://a/3", "http://a/robots.txt"]),
            st.sampled_from(["text", "other", "remove", "redirect"]),
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.integers(1, 4), min_size=1, max_size=6),
)
def test_batches_joined_are_the_batch_of_all_their_pages(entries, sizes):
    """Pages prepared in several batches then joined (what `neardup add` applies while its
    index opens) are what one batch of all of them gives: the last entry of a URL wins,
    an update, a removal, a redirect or a skip (robots.txt, a crawler's file)."""
    from neardup.index.state.prepare import PreparedBatch

    def update(url: str, what: str) -> PageUpdate:
        if what == "remove":
            return PageUpdate(url, remove=True)
        if what == "redirect":
            return PageUpdate(url, redirect_to="http://a/9")
        return PageUpdate(url, text=f"{what} words for {url} " * 5)

    ups = [update(u, w) for u, w in entries]
    parts, at = [], 0
    for size in sizes * len(ups):
        if at >= len(ups):
            break
        parts.append(ups[at : at + size])
        at += size
    conf = Settings()
    joined = PreparedBatch.joined([prepare_batch(p, conf, 3, by_url=True) for p in parts])
    whole = prepare_batch(ups, conf, 3, by_url=True)
    assert joined.updates == whole.updates
    assert joined.skipped == whole.skipped
    assert joined.sketches.keys() == whole.sketches.keys()
    for url, sk in whole.sketches.items():
        assert np.array_equal(joined.sketches[url].signature, sk.signature)
        assert joined.sketches[url].exact_fp == sk.exact_fp
