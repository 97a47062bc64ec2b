"""Property tests (hypothesis) for the kernels and the readers, each against a reference the
code under test did not compute: plain-Python shingle sets and Jaccard, scipy's connected
components, and archives written by warcio rather than by neardup's own writer."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.sparse import coo_matrix
from scipy.sparse.csgraph import connected_components as scipy_components
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

import neardup
from neardup.ingest import iter_records
from neardup.kernels.graph import Graph, connected_components

VOCAB = [f"w{i}" for i in range(60)]  # lower-case ASCII words: canonical text is the text
K = 128
SHINGLE = 5

common = settings(derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def exact_jaccard(a: list[str], b: list[str]) -> float:
    """r(A, B) on sets of 5-word shingles, written out plainly."""
    sa = {tuple(a[i : i + SHINGLE]) for i in range(len(a) - SHINGLE + 1)}
    sb = {tuple(b[i : i + SHINGLE]) for i in range(len(b) - SHINGLE + 1)}
    return len(sa & sb) / len(sa | sb)


@st.composite
def document_pairs(draw: st.DrawFn) -> tuple[list[str], list[str]]:
    """A text and an edited copy: words replaced, inserted and deleted at random places."""
    a = draw(st.lists(st.sampled_from(VOCAB), min_size=SHINGLE + 5, max_size=300))
    b = list(a)
    for _ in range(draw(st.integers(0, 40))):
        op = draw(st.sampled_from(["replace", "insert", "delete"]))
        pos = draw(st.integers(0, len(b) - 1))
        if op == "replace":
            b[pos] = draw(st.sampled_from(VOCAB))
        elif op == "insert":
            b.insert(pos, draw(st.sampled_from(VOCAB)))
        elif len(b) > SHINGLE + 1:
            del b[pos]
    return a, b


@settings(common, max_examples=150)
@given(document_pairs())
def test_minhash_estimate_is_within_its_stated_bound_of_exact_jaccard(pair) -> None:
    """The share of equal min-hash values estimates r(A, B) with standard deviation
    sqrt(r(1-r)/K); the estimate stays within 5 standard deviations plus 1/K of the exact
    value (a chance of about 1e-6 per pair to fail for a correct sketch)."""
    a, b = pair
    exact = exact_jaccard(a, b)
    sa = neardup.sketch(" ".join(a)).minhash
    sb = neardup.sketch(" ".join(b)).minhash
    assert sa.shape == (K,)
    estimate = float(np.mean(sa == sb))
    bound = 5 * math.sqrt(max(exact * (1 - exact), 1 / K) / K) + 1 / K
    assert abs(estimate - exact) <= bound
    assert neardup.resemblance(" ".join(a), " ".join(b)) == pytest.approx(exact)


@st.composite
def graphs(draw: st.DrawFn) -> tuple[int, np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 40))
    edges = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=3 * n))
    uniq = sorted({(min(u, v), max(u, v)) for u, v in edges if u != v})
    a = np.array([u for u, _ in uniq], dtype=np.int64)
    b = np.array([v for _, v in uniq], dtype=np.int64)
    return n, a, b


def _partition(labels: np.ndarray) -> set[frozenset[int]]:
    groups: dict[int, set[int]] = {}
    for node, label in enumerate(labels.tolist()):
        groups.setdefault(label, set()).add(node)
    return {frozenset(g) for g in groups.values()}


@common
@given(graphs(), st.randoms(use_true_random=False))
def test_components_match_scipy_and_ignore_node_order(graph, rnd) -> None:
    n, a, b = graph
    labels = connected_components(Graph.from_edges(n, a, b))
    matrix = coo_matrix((np.ones(a.size), (a, b)), shape=(n, n))
    _, reference = scipy_components(matrix, directed=False)
    assert _partition(labels) == _partition(reference)
    # renumber the nodes: the same nodes end up together
    perm = list(range(n))
    rnd.shuffle(perm)
    p = np.array(perm, dtype=np.int64)
    relabelled = connected_components(Graph.from_edges(n, p[a], p[b]))
    back = {frozenset(perm[x] for x in group) for group in _partition(labels)}
    assert _partition(relabelled) == back


@common
@given(graphs(), st.randoms(use_true_random=False))
def test_adjacency_is_scipys_compressed_rows(graph, rnd) -> None:
    """`Graph.from_edges` (neardup's own counting sort) gives scipy's compressed rows of the
    same symmetric entries, repeated edges (their weights summed) included."""
    n, a, b = graph
    if a.size:  # some edges twice, as a caller may send them
        again = np.array(rnd.sample(range(a.size), rnd.randrange(0, a.size + 1)), np.int64)
        a, b = np.concatenate([a, a[again]]), np.concatenate([b, b[again]])
    sim = np.array([rnd.choice((0.25, 0.5, 0.75, 1.0)) for _ in range(a.size)])
    got = Graph.from_edges(n, a, b, sim)
    rows, cols = np.concatenate([a, b]), np.concatenate([b, a])
    want = coo_matrix((np.concatenate([sim, sim]), (rows, cols)), shape=(n, n)).tocsr()
    want.sort_indices()
    assert np.array_equal(got.indptr, want.indptr)
    assert np.array_equal(got.indices, want.indices)
    assert np.array_equal(got.weights, want.data)
    assert connected_components(got).tolist() == [
        min(group)
        for node in range(n)
        for group in _partition(connected_components(got))
        if node in group
    ]


RECORD_KINDS = ["response", "request", "metadata", "revisit", "resource"]


def _warc_with(kinds: list[str], gzip: bool) -> bytes:
    """A WARC written by warcio (not by neardup), request-first like real crawlers."""
    out = io.BytesIO()
    writer = WARCWriter(out, gzip=gzip)
    writer.write_record(writer.create_warcinfo_record("x.warc", {"software": "test"}))
    for i, kind in enumerate(kinds):
        url = f"http://example.org/p{i}"
        if kind == "response":
            body = f"<html><body><p>page {i} text here</p></body></html>".encode()
            http = StatusAndHeaders("200 OK", [("Content-Type", "text/html")], protocol="HTTP/1.1")
            rec = writer.create_warc_record(
                url, "response", payload=io.BytesIO(body), http_headers=http
            )
        elif kind == "request":
            http = StatusAndHeaders(
                f"GET /p{i} HTTP/1.1", [("Host", "example.org")], is_http_request=True
            )
            rec = writer.create_warc_record(
                url, "request", payload=io.BytesIO(b""), http_headers=http
            )
        elif kind == "metadata":
            rec = writer.create_warc_record(
                url,
                "metadata",
                payload=io.BytesIO(b"via: x\n"),
                warc_content_type="application/warc-fields",
            )
        elif kind == "revisit":
            rec = writer.create_revisit_record(
                url, digest="sha1:AAAA", refers_to_uri=url, refers_to_date="2024-01-01T00:00:00Z"
            )
        else:
            rec = writer.create_warc_record(
                url, "resource", payload=io.BytesIO(b"plain text"), warc_content_type="text/plain"
            )
        writer.write_record(rec)
    return out.getvalue()


@settings(common, max_examples=40)
@given(st.lists(st.sampled_from(RECORD_KINDS), max_size=25), st.booleans())
def test_readers_account_for_every_record(tmp_path_factory, kinds, gzip) -> None:
    """Every record of an archive written by warcio comes out of the reader, in order, with
    its type: a page to compare, or a row with the reason it was skipped."""
    path = Path(tmp_path_factory.mktemp("warc")) / ("x.warc.gz" if gzip else "x.warc")
    path.write_bytes(_warc_with(kinds, gzip))
    records = list(iter_records([str(path)]))
    assert [r.record_type for r in records] == ["warcinfo", *kinds]
    offsets = [r.offset for r in records]
    assert offsets == sorted(offsets) and len(set(offsets)) == len(offsets)
    for rec in records:
        if rec.record_type in ("warcinfo", "request", "metadata", "revisit"):
            assert rec.skipped_reason, rec.record_type
        if rec.record_type == "response":
            assert rec.skipped_reason is None and rec.status == 200
