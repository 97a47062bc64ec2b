"""Random update batches over a real corpus, shared by the service's property tests: the
pages (standard-library docstring pages with copies, edits, drifting chains and
truncations), their URLs, and one operation of a batch as hypothesis draws it."""

from __future__ import annotations

from functools import cache

import numpy as np
from hypothesis import strategies as st

from neardup.synth.corpus import stdlib_documents
from neardup.synth.edits import edit_document, truncate_document

N_URLS = 24


@cache
def texts() -> tuple[str, ...]:
    """8 variants of each of 4 documents: the page, an exact copy, a 1 % edit (above the
    core rule's strong similarity), a drifting chain of 2 % edits (each link near the
    threshold, the far ends below it, so components hold several clusters) and a
    truncation."""
    rng = np.random.default_rng(11)
    out = []
    for doc in stdlib_documents(min_words=150, limit=4):
        variants = [doc, doc, edit_document(doc, rng, 0.0, 0.0, 0.01)]
        link = doc
        for _ in range(4):
            link = edit_document(link, rng, 0.0, 0.0, 0.02)
            variants.append(link)
        variants.append(truncate_document(doc, 0.85))
        out.extend("\n\n".join([v.title, *v.paragraphs]) for v in variants)
    return tuple(out)


def url(i: int) -> str:
    return f"https://h{(i * 7) % 5}.example/p/{i}" + ("?s=1" if i % 4 == 0 else "")


op = st.one_of(
    st.tuples(st.just("put"), st.integers(0, N_URLS - 1), st.integers(0, 31)),
    st.tuples(st.just("put"), st.integers(0, N_URLS - 1), st.integers(0, 31)),
    st.tuples(st.just("remove"), st.integers(0, N_URLS - 1), st.just(0)),
    st.tuples(st.just("redirect"), st.integers(0, N_URLS - 1), st.integers(0, N_URLS - 1)),
    st.tuples(st.just("reopen"), st.just(0), st.just(0)),
)
