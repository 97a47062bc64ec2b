"""A batch sketched at once gives each page what one text alone would give."""

from __future__ import annotations

import numpy as np

from neardup.config import Settings
from neardup.kernels import fingerprint64, sketch_text
from neardup.service.lengths import dim_lengths
from neardup.service.prepare import prepare_batch
from neardup.service.updates import PageUpdate


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
