"""Replicated collections: the merge conditions of Cho et al. (2000) on hand-made graphs."""

from __future__ import annotations

import pytest
from graphs import crawl, site

from neardup.linkgraph.collections import (
    CollectionOptions,
    collections_from_run,
    copy_prefix,
    find_collections,
)
from neardup.linkgraph.relational import components, run_sql

TINY = CollectionOptions(min_size=1)
TREE = {"a": ["b", "c"], "b": ["d"], "c": [], "d": []}  # Figure 6: a -> b, c; b -> d


def copies_of(*sites_: tuple[list, list]) -> tuple[list, list]:
    pages = [p for s in sites_ for p in s[0]]
    links = [lk for s in sites_ for lk in s[1]]
    return pages, links


def test_equal_trees_form_one_similar_cluster():
    pages, links = copies_of(*(site(h, TREE) for h in ("a.example", "b.example", "c.example")))
    result = find_collections(crawl(pages, links), TINY)
    assert result.clusters.num_rows == 1
    row = result.clusters.to_pylist()[0]
    assert (row["cardinality"], row["size"], row["pages"]) == (3, 4, 12)
    assert sorted(row["sites"]) == ["a.example", "b.example", "c.example"]
    assert result.similar_edges == result.merge_edges == 3  # a-b, a-c, b-d: |Ri| = s = d = |Rj|
    # every copy has its own root: the page in the root trivial cluster (most in-links)
    roots = result.pages.filter(result.pages["is_root"]).column("url").to_pylist()
    assert len(roots) == 3 and len({r.rsplit("/", 1)[1] for r in roots}) == 1


def test_link_summary_counts_s_and_d():
    # Ri = {a on 3 sites}, Rj = {b on 2 sites}; the third a links to the first site's b.
    pages = [(f"https://{h}/a", "a") for h in "xyz"] + [(f"https://{h}/b", "b") for h in "xy"]
    links = [
        ("https://x/a", "https://x/b"),
        ("https://y/a", "https://y/b"),
        ("https://z/a", "https://x/b"),
    ]
    con = crawl(pages, links)
    for name in ("trivial.sql", "link.sql", "link_summary.sql"):
        run_sql(con, name, single_site=False)
    assert con.sql("SELECT a, b, s, d FROM link_summary").fetchall() == [(3, 2, 3, 2)]


def test_partial_mirror_joins_only_with_the_extended_condition():
    # Figure 10: the partial mirror lacks d; its link to d points to the primary's copy.
    # (A page found on one site only is no trivial cluster, so a mirror holds d as well.)
    primary_pages, primary_links = site("one.example", TREE)
    mirror_pages, mirror_links = site("mirror.example", TREE)
    partial_pages, partial_links = site("two.example", {"a": ["b", "c"], "b": [], "c": []})
    partial_links.append(("https://two.example/b.html", "https://one.example/d.html"))
    con = crawl(
        primary_pages + mirror_pages + partial_pages, primary_links + mirror_links + partial_links
    )
    extended = find_collections(con, TINY)
    assert extended.clusters.num_rows == 1
    row = extended.clusters.to_pylist()[0]
    assert (row["cardinality"], row["size"]) == (3, 4)
    copies = {r["host"]: r["pages"] for r in extended.copies.to_pylist()}
    assert copies == {"one.example": 4, "mirror.example": 4, "two.example": 3}
    # the primary is the principal copy: the partial mirror links to it
    assert row["principal_host"] == "one.example"
    assert extended.merge_edges > extended.similar_edges  # b -> d: |Ri| = s = 3 > d = 2
    similar = find_collections(con, CollectionOptions(extended=False, min_size=1))
    assert [r["size"] for r in similar.clusters.to_pylist()] == [3, 1]  # d stays apart


def test_break_point_splits_the_collection():
    # Figure 3(c): p -> q -> r on site 1, p -> t -> r on site 2, q and t differ.
    pages = [
        ("https://i.example/p", "p"),
        ("https://i.example/q", "q"),
        ("https://i.example/r", "r"),
        ("https://ii.example/p", "p"),
        ("https://ii.example/t", "t"),
        ("https://ii.example/r", "r"),
    ]
    links = [
        ("https://i.example/p", "https://i.example/q"),
        ("https://i.example/q", "https://i.example/r"),
        ("https://ii.example/p", "https://ii.example/t"),
        ("https://ii.example/t", "https://ii.example/r"),
    ]
    result = find_collections(crawl(pages, links), TINY)
    assert result.merge_edges == 0
    assert result.clusters.num_rows == 0 or all(r["size"] == 1 for r in result.clusters.to_pylist())


def test_break_point_phase_folds_a_subtree_linked_from_every_copy():
    # A stale copy changed page b: {b} is on two sites only, {d} below it too. The subtree
    # still hangs off every copy of a on its own host, so it folds back in.
    sites_ = [site(h, TREE) for h in ("a.example", "b.example")]
    stale_pages, stale_links = site("c.example", {"a": ["x", "c"], "x": [], "c": []})
    pages, links = copies_of(*sites_)
    pages = [(u, k) for u, k in pages] + [(u, "stale-x" if k == "x" else k) for u, k in stale_pages]
    result = find_collections(crawl(pages, links + stale_links), TINY)
    assert result.clusters.num_rows == 1
    copies = {r["host"]: r["pages"] for r in result.copies.to_pylist()}
    assert copies == {"a.example": 4, "b.example": 4, "c.example": 2}


def test_two_collections_on_one_site():
    manual = {"m1": ["m2", "m3"], "m2": [], "m3": []}
    other = {"n1": ["n2", "n3"], "n2": [], "n3": []}
    pages, links = copies_of(
        site("both.example", manual, "/m/"),
        site("both.example", other, "/n/"),
        site("m-mirror.example", manual),
        site("n-mirror.example", other),
    )
    result = find_collections(crawl(pages, links), TINY)
    assert result.clusters.num_rows == 2
    for row in result.clusters.to_pylist():
        assert (row["cardinality"], row["size"]) == (2, 3)
        assert "both.example" in row["sites"]
    prefixes = sorted(result.copies.column("prefix").to_pylist())
    assert "https://both.example/m/" in prefixes and "https://both.example/n/" in prefixes


def test_noise_below_min_size_and_single_site():
    pages, links = copies_of(*(site(h, TREE) for h in ("a.example", "b.example")))
    con = crawl(pages, links)
    assert find_collections(con, CollectionOptions()).clusters.num_rows == 0  # 4 < 10 pages
    assert find_collections(con, CollectionOptions(min_size=4)).clusters.num_rows == 1
    single = find_collections(con, CollectionOptions(single_site=True, min_size=1))
    assert all(r["n_hosts"] == 1 for r in single.copies.to_pylist())
    with pytest.raises(ValueError):
        CollectionOptions(min_size=0)


def test_components_and_prefix_helpers():
    labels = components([10, 11, 12, 13], [10, 12], [11, 13])
    assert labels.tolist() == [10, 10, 12, 12]
    with pytest.raises(ValueError):
        components([1, 2], [1], [3])
    assert copy_prefix("https://h/a/b/x.html", "https://h/a/c/y.html") == "https://h/a/"
    assert copy_prefix("https://h/x.html", "https://h/y.html") == "https://h/"
    assert copy_prefix("https://a.example/x", "https://b.example/y") == "https://a.example/"


def test_demo_crawl_primary_and_mirror_collection(demo_run, demo_crawl, tmp_path):
    result = collections_from_run(demo_run.path)
    topo = demo_crawl.topology["hosts"]
    assert result.clusters.num_rows >= 1
    top = result.clusters.to_pylist()[0]
    assert top["principal_host"] == topo["primary"]["host"]
    assert {topo["primary"]["host"], topo["mirror"]["host"]} <= set(top["sites"])
    assert top["size"] >= 0.8 * demo_crawl.topology["documents"]
    written = result.write(tmp_path)
    assert written[0].name == "collections.parquet"
