"""Tier 2 of the service: length mapping, the many-to-all kernels, redirect popularity."""

from __future__ import annotations

import numpy as np
import pytest

from neardup.config import Settings
from neardup.index.state.read_records import CheckMatch
from neardup.index.state.tier2 import agreement_matrix, all_pairs
from neardup.kernels import sketch_texts
from neardup.service import (
    LengthMap,
    PageUpdate,
    RedirectGraph,
    ServiceError,
    ServiceIndex,
    ServiceOptions,
    SignatureStore,
    balanced_edges,
    dim_lengths,
    effective_popularity,
    fine_bounds,
    length_partition_report,
)


def doc(tag: str, n: int = 300, extra: str = "") -> str:
    return " ".join(f"{tag}{i}" for i in range(n)) + (" " + extra if extra else "")


def test_fine_and_coarse_intervals_follow_the_paper():
    # §4.3: sizes 1..10 at τ = 0.8 give [1,2) [2,3) [3,4) [4,6) [6,8) [8,10].
    assert fine_bounds(np.arange(1, 11), 0.8).tolist() == [1, 2, 3, 4, 6, 8]
    # Page counts 2,3,4,5,2,1 in those intervals, merged into 4: [1,3) [3,4) [4,6) [6,10].
    vals = np.repeat([1, 2, 3, 4, 6, 8], [2, 3, 4, 5, 2, 1])
    assert balanced_edges(vals, 0.8, 4).tolist() == [3, 4, 6]
    # Counts 2,3,4,10,2,1: the spike stays in one interval (5, 4, 10, 3).
    vals = np.repeat([1, 2, 3, 4, 6, 8], [2, 3, 4, 10, 2, 1])
    edges = balanced_edges(vals, 0.8, 4)
    counts = np.bincount(np.searchsorted(edges, vals, side="right"))
    assert counts.tolist() == [5, 4, 10, 3]


def test_dim_lengths_count_word_occurrences_per_bucket():
    texts = ["Alpha beta, gamma! alpha", "", "same same same same"]
    lens = dim_lengths(texts, 3)
    assert lens.sum(1).tolist() == [4, 0, 4]  # occurrences, not distinct words
    assert sorted(lens[2].tolist()) == [0, 0, 4]  # one word, one sub-dictionary
    # A word lands in the same bucket on every page.
    assert (dim_lengths(["same"], 3)[0] * 4 == lens[2]).all()
    with pytest.raises(ValueError):
        dim_lengths(texts, 0)


def test_length_map_windows_reach_the_right_cells():
    lm = LengthMap((np.array([300.0]), np.array([300.0])))
    # The paper's Figure 2 at τ = 0.9, ρ = 1: (100, 500) meets one partition ...
    w = lm.windows(np.array([[100, 500]]), 0.9, 1.0)[0]
    assert w.tolist() == [[0, 0], [1, 1]]
    # ... and (280, 500) two, because 280 / 0.9 > 300.
    w = lm.windows(np.array([[280, 500]]), 0.9, 1.0)[0]
    assert w.tolist() == [[0, 1], [1, 1]]
    assert LengthMap.from_json(lm.to_json()).shape == (2, 2)


def _store(mode: str, texts: list[str], rho: float = 1.3) -> tuple[SignatureStore, np.ndarray]:
    s = Settings()
    sk = sketch_texts(texts, s)
    lens = dim_lengths(texts, 3)
    st = SignatureStore(s.num_perm, 3, s.threshold, mode, parts=4, rho=rho, bands=18, rows=7)
    for i in range(len(texts)):
        st.put(f"u{i}", sk.minhash[i], lens[i])
    return st, sk.minhash


def _texts(seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    base = [doc(f"w{k}x", int(n)) for k, n in enumerate(rng.integers(40, 900, size=60))]
    near = []
    for t in base[:30]:
        words = t.split()
        cut = int(len(words) * rng.uniform(0.0, 0.12))
        near.append(" ".join(words[cut:] + ["edit"] * (cut // 2)))
    return base + near


@pytest.mark.parametrize("mode", ["lengths", "lsh"])
def test_many_to_all_finds_verified_pairs_only(mode):
    texts = _texts()
    st, sigs = _store(mode, texts)
    rows = np.array([st.row_of[f"u{i}"] for i in range(len(texts))])
    found = st.many_to_all(st.sigs[rows], st.lens[rows], rows)
    got = {(min(rows[q], r), max(rows[q], r)) for q, r in zip(found.query, found.row, strict=True)}
    a, b = all_pairs(np.ascontiguousarray(sigs), st.need)
    exact = set(zip(a.tolist(), b.tolist(), strict=True))
    assert got <= exact  # everything reported is verified
    assert len(exact) >= 20 and len(got) >= 0.9 * len(exact)
    assert all(q != r for q, r in zip(rows[found.query], found.row, strict=True))
    assert found.comparisons < len(texts) * (len(texts) - 1)  # something was avoided


def test_lengths_mode_is_exact_inside_the_window():
    texts = _texts(1)
    st, sigs = _store("lengths", texts, rho=1.0)
    rows = np.array([st.row_of[f"u{i}"] for i in range(len(texts))])
    found = st.many_to_all(st.sigs[rows], st.lens[rows], rows)
    got = {(int(rows[q]), int(r)) for q, r in zip(found.query, found.row, strict=True)}
    lens = st.lens[rows].astype(float)
    a, b = all_pairs(np.ascontiguousarray(sigs), st.need)
    for i, j in zip(a.tolist(), b.tolist(), strict=True):
        fits = ((lens[j] > lens[i] * 0.8) & (lens[j] < lens[i] / 0.8)).all()
        if fits:  # inside the paper's window: tier 2 cannot miss it
            assert (i, j) in got and (j, i) in got


def test_length_mapping_prunes_pages_of_other_lengths():
    short, long_ = doc("a", 100), doc("a", 100) + " " + doc("b", 900)
    st, _ = _store("lengths", [short, long_, doc("c", 110)])
    found = st.many_to_all(st.sigs[[0]], st.lens[[0]], np.array([0]))
    # The long page is never compared; the page of similar length is.
    assert found.comparisons == 1 and len(found.query) == 0


def test_store_reuses_rows_and_ignores_dropped():
    st, _ = _store("lengths", [doc("a"), doc("a"), doc("b")])
    st.drop("u1")
    assert len(st) == 2
    found = st.many_to_all(st.sigs[[0]], st.lens[[0]], np.array([0]))
    assert len(found.query) == 0
    row = st.put("new", st.sigs[0].copy(), st.lens[0].copy())
    assert row == 1  # the freed row
    found = st.many_to_all(st.sigs[[0]], st.lens[[0]], np.array([0]))
    assert [st.urls[r] for r in found.row] == ["new"]


def test_report_machines_and_pairs_kept():
    rng = np.random.default_rng(2)
    spike = np.full((2000, 3), 80) + rng.integers(-8, 9, size=(2000, 3))
    lens = np.concatenate([spike, rng.integers(20, 3000, size=(2000, 3))])
    one = length_partition_report(lens.sum(1), 1, 8, machines=8)
    three = length_partition_report(lens, 3, 8, machines=8)
    assert three["imbalance"] < one["imbalance"]  # extra dimensions split the spike
    pairs = np.array([[i, i] for i in range(100)])
    assert length_partition_report(lens, 3, 8, pairs=pairs)["pairs_kept"] == 1.0


def test_agreement_matrix():
    sigs = np.array([[1, 2, 3, 4], [1, 2, 0, 0], [9, 9, 9, 9]], dtype=np.uint32)
    m = agreement_matrix(sigs)
    assert m.tolist() == [[4, 2, 0], [2, 4, 0], [0, 0, 4]]


# ------------------------------------------------------------------ popularity


def test_redirect_graph_credits_chains_once():
    g = RedirectGraph()
    g.set("r1", None, "r2")
    g.set("r2", None, "t")
    g.set("c1", None, "c2")
    g.set("c2", None, "c1")  # a cycle elsewhere does not loop
    links = {"t": 1, "r1": 5, "r2": 2}.get
    assert g.popularity("t", lambda u: links(u, 0)) == 8
    g.set("r1", "r2", None)
    assert g.popularity("t", lambda u: links(u, 0)) == 3
    assert effective_popularity({"t": 1, "r": 4}, {"r": "t"}, ["t", "r"]) == [5, 4]


@pytest.fixture
def ix(tmp_path):
    index = ServiceIndex(tmp_path / "store")
    yield index
    index.close()


def test_winner_counts_inlinks_through_redirects(ix):
    a, b = "http://mirror.example/a/very/long/path.html", "http://b.example/p"
    ix.apply([PageUpdate(a, text=doc("x"), links_in=1), PageUpdate(b, text=doc("x"), links_in=3)])
    g = ix.status(a).group_id
    assert ix.group(g).winner_url == b
    # Old URLs that now redirect (through a chain) to `a` bring it their in-links.
    ix.apply(
        [
            PageUpdate("http://old.example/1", redirect_to="http://old.example/2", links_in=2),
            PageUpdate("http://old.example/2", redirect_to=a, links_in=2),
        ]
    )
    assert ix.group(g).winner_url == a
    assert {m.url: m.popularity for m in ix.group(g).members} == {a: 5, b: 3}
    # A popularity update of a redirect moves the credit too: 1 + 0 + 2 ties b's 3, and
    # the shorter URL wins the tie.
    ix.apply([PageUpdate("http://old.example/1", links_in=0)])
    assert ix.group(g).winner_url == b
    ix.apply([PageUpdate("http://old.example/1", links_in=4)])
    assert ix.group(g).winner_url == a
    ix.apply([PageUpdate("http://old.example/2", remove=True)])
    assert ix.group(g).winner_url == b  # the chain is broken: its credit is gone
    assert ix.status(b).is_duplicate is False and ix.status(a).is_duplicate
    assert ix.consistency_errors() == []


def test_lsh_option_and_bad_options(tmp_path):
    with ServiceIndex(tmp_path / "s", options=ServiceOptions(tier2="lsh")) as ix:
        ix.apply([PageUpdate("http://a/1", text=doc("a")), PageUpdate("http://a/2", text=doc("a"))])
        assert ix.status("http://a/2").is_duplicate
        assert ix.check(doc("a")).is_duplicate
    with pytest.raises(ServiceError):
        ServiceIndex(tmp_path / "t", options=ServiceOptions(tier2="nope"))
    with pytest.raises(ServiceError):
        ServiceIndex(tmp_path / "u", options=ServiceOptions(rho=0.5))


def test_length_grid_persists(tmp_path):
    texts = [doc(f"p{i}x", 50 + 40 * i) for i in range(30)]
    lengths = ServiceOptions(tier2="lengths")
    with ServiceIndex(tmp_path / "s", options=lengths) as ix:
        ix.apply([PageUpdate(f"http://a/{i}", text=t) for i, t in enumerate(texts)])
        edges = ix.store_rows.map.to_json()
    with ServiceIndex(tmp_path / "s") as ix:  # the stored options: lengths
        assert ix.options.tier2 == "lengths"
        assert ix.store_rows.map.to_json() == edges
        assert ix.check(texts[3]).matches[0].url == "http://a/3"


def _chain_texts() -> list[str]:
    words = [f"w{i}" for i in range(3000)]
    return [" ".join(words[i * 25 : i * 25 + 300]) for i in range(14)]


@pytest.mark.parametrize("order", [list(range(14)), [0, 13, 6, 2, 9, 4, 11, 1, 7, 12, 3, 8, 5, 10]])
def test_incremental_groups_match_the_scan_on_a_chain(tmp_path, order, scanned):
    # A drifting chain: neighbours resemble, far ends do not. Fed one page per batch in any
    # order, the groups must be the clusters `neardup.scan` finds among all pages at once.
    texts = _chain_texts()
    settings = Settings(threshold=0.7)
    urls = [f"http://c/{i:02d}" for i in range(14)]
    with ServiceIndex(tmp_path / "s", settings) as ix:
        for i in order:
            ix.apply([PageUpdate(urls[i], text=texts[i])])
        got = {frozenset(m) for m in ix.groups.values()}
        assert got == scanned(dict(zip(urls, texts, strict=True)), settings)
        assert len(got) > 1 and ix.consistency_errors() == []


def test_length_window_covers_a_zero_length():
    # Intervals [<1) [1,2) [2,..): a page with no word in the dimension must reach pages
    # with one, and the other way round (the factor alone gave 0 the window [0, 0]).
    lm = LengthMap((np.array([1.0, 2.0]),))
    for lens, other in (([0], 1), ([1], 0)):
        lo, hi = lm.windows(np.array([lens]), 0.8, 1.3)[0, 0]
        assert lo <= other <= hi


def test_short_page_with_an_empty_dimension_finds_its_duplicate(tmp_path):
    # 14 words over 8 sub-dictionaries leave one empty; one word more fills it. The two
    # pages resemble at 0.94 (5-shingles), so the lookup must find either from the other.
    base = " ".join(f"w{i}" for i in range(14))
    longer = base + " x17"
    assert dim_lengths([base], 8)[0][4] == 0 and dim_lengths([longer], 8)[0][4] == 1
    fillers = [" ".join(f"f{j}q{i}" for i in range(8 + j % 9)) for j in range(60)]
    with ServiceIndex(tmp_path / "s", options=ServiceOptions(dims=8, tier2="lengths")) as ix:
        ix.apply([PageUpdate(f"http://f/{j}", text=t) for j, t in enumerate(fillers)])
        ix.apply([PageUpdate("http://a/base", text=base)])
        assert ix.store_rows.map is not None
        assert ix.check(longer).matches[0].url == "http://a/base"
        ix.apply([PageUpdate("http://a/base", remove=True)])
        ix.apply([PageUpdate("http://a/longer", text=longer)])
        assert ix.check(base).matches[0].url == "http://a/longer"


def test_band_checks_find_what_the_scan_pairs_and_nothing_below_tau(tmp_path):
    """The default check goes through the scan's band index: a stored text finds itself at
    1.0, each near copy (exact 5-shingle Jaccard >= 0.9, counted here with Python sets)
    finds its original, and every match reported resembles the query by >= tau."""
    rng = np.random.default_rng(4)
    vocab = [f"v{i}" for i in range(4000)]
    originals = [" ".join(rng.choice(vocab, 300)) for _ in range(40)]
    with ServiceIndex(tmp_path / "s") as ix:
        assert ix.options.tier2 == "bands" and len(ix.store_rows) == 0
        ix.apply([PageUpdate(f"http://o/{i}", text=t) for i, t in enumerate(originals)])
        for i, text in enumerate(originals):
            words = text.split()
            words[int(rng.integers(0, len(words)))] = "changed"
            copy = " ".join(words)
            exact = _jaccard(copy, text)
            got = ix.check(copy)
            urls = {m.url for m in got.matches}
            if exact >= 0.9:
                assert f"http://o/{i}" in urls
            assert all(m.resemblance >= ix.threshold for m in got.matches)
            assert ix.check(text).matches[0] == CheckMatch(
                url=f"http://o/{i}",
                group_id=ix.pages[f"http://o/{i}"].group_id,
                resemblance=1.0,
            )
        assert ix.check(" ".join(rng.choice(vocab, 300))).matches == ()


def _jaccard(a: str, b: str, w: int = 5) -> float:
    def sh(t: str) -> set[tuple[str, ...]]:
        x = t.split()
        return {tuple(x[i : i + w]) for i in range(len(x) - w + 1)}

    sa, sb = sh(a), sh(b)
    return len(sa & sb) / len(sa | sb)
