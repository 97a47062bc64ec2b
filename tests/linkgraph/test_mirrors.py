"""Mirrored hosts: candidates, aliases, auto-mirrors and URL-suffix confirmation."""

from __future__ import annotations

import numpy as np
import pytest
from graphs import crawl

from neardup.linkgraph.mirrors import (
    MirrorOptions,
    find_mirrors,
    mirrors_from_run,
    suffix_match_depth,
)

N = 12  # pages per host, above the default minimum of 10


def pages_on(host: str, prefix: str = "/docs/", n: int = N, key: str = "doc") -> list:
    return [(f"https://{host}{prefix}p{i}.html", f"{key}{i}") for i in range(n)]


def pairs_by_hosts(result) -> dict[tuple[str, str], dict]:
    return {(r["host_a"], r["host_b"]): r for r in result.pairs.to_pylist()}


def test_mirror_pair_confirmed_by_suffixes_and_oriented_by_links():
    pages = pages_on("origin.example") + pages_on("copy.example")
    # the copy links back to the origin: the origin is host_a
    links = [("https://copy.example/docs/p0.html", "https://origin.example/docs/p1.html")]
    result = find_mirrors(crawl(pages, links))
    row = pairs_by_hosts(result)[("origin.example", "copy.example")]
    assert (row["shared_pages"], row["suffix_matches"], row["full_suffix_matches"]) == (N, N, N)
    assert (row["kind"], row["verdict"], row["suffix_share"]) == ("mirror", "confirmed", 1.0)
    assert result.confirmed().num_rows == 1


def test_rerooted_and_unconfirmed_pairs():
    pages = (
        pages_on("origin.example", "/docs/v1/")
        + pages_on("reroot.example", "/pub/mirror/origin/")  # same last arc, other prefix
        + [(f"https://renamed.example/x/q{i}.html", f"doc{i}") for i in range(N)]
    )
    result = find_mirrors(crawl(pages))
    rows = pairs_by_hosts(result)
    assert rows[("origin.example", "reroot.example")]["verdict"] == "rerooted"
    renamed = next(r for (a, b), r in rows.items() if "renamed.example" in (a, b))
    assert (renamed["verdict"], renamed["suffix_matches"]) == ("unconfirmed", 0)
    assert result.confirmed().num_rows == 1


def test_aliases_and_auto_mirrors_are_set_apart():
    pages = (
        pages_on("site.example")
        + pages_on("www.site.example")  # www alias
        + pages_on("other-name.example")  # same address as site.example
        + pages_on("self.example", "/a/", key="self")
        + pages_on("self.example", "/b/", key="self")  # a host duplicating itself
    )
    ips = {"site.example": "192.0.2.1", "other-name.example": "192.0.2.1"}
    result = find_mirrors(crawl(pages, ips=ips))
    rows = pairs_by_hosts(result)
    www = rows[("site.example", "www.site.example")]
    assert (www["kind"], www["alias_reason"]) == ("alias", "www")
    same_ip = next(
        r for (a, b), r in rows.items() if {a, b} == {"site.example", "other-name.example"}
    )
    assert (same_ip["kind"], same_ip["alias_reason"]) == ("alias", "same address")
    assert all(a != b for a, b in rows)  # no host pairs with itself
    assert all("self.example" not in (a, b) for a, b in rows)
    assert result.auto_mirrors == 1


def test_minimum_shared_pages():
    pages = pages_on("a.example", n=9) + pages_on("b.example", n=9)
    assert find_mirrors(crawl(pages)).pairs.num_rows == 0
    assert find_mirrors(crawl(pages), MirrorOptions(min_pages=9)).pairs.num_rows == 1
    with pytest.raises(ValueError):
        MirrorOptions(min_suffix_share=1.5)


def test_suffix_match_depth_through_the_bloom_filter():
    keys_a = np.array([11, 12, 13, 21], dtype=np.uint64)
    # page 7 matches at k = 1 and 2, page 8 at k = 1 only, page 9 nowhere
    keys_b = np.array([11, 12, 99, 21, 98, 97], dtype=np.uint64)
    docs_b = np.array([7, 7, 7, 8, 8, 9])
    depth_b = np.array([1, 2, 3, 1, 2, 1])
    pages, depth = suffix_match_depth(keys_a, keys_b, docs_b, depth_b)
    assert pages.tolist() == [7, 8, 9]
    assert depth.tolist() == [2, 1, 0]


def test_suffix_method_finds_hosts_sharing_paths():
    pages = pages_on("a.example") + pages_on("b.example") + pages_on("c.example", key="other")
    result = find_mirrors(crawl(pages))
    bb = {(r["host_1"], r["host_2"]): r for r in result.suffix_pairs.to_pylist()}
    assert bb[("a.example", "b.example")]["confirmed"]
    # c shares every path but none of the content: a candidate, not confirmed
    assert not bb[("a.example", "c.example")]["confirmed"]


def test_demo_crawl_mirror_pair(demo_run, demo_crawl):
    result = mirrors_from_run(demo_run.path)
    hosts = demo_crawl.topology["hosts"]
    primary, mirror = hosts["primary"]["host"], hosts["mirror"]["host"]
    rows = pairs_by_hosts(result)
    assert rows[(primary, mirror)]["verdict"] == "confirmed"
    alias = rows[(primary, demo_crawl.topology["alias_host"])]
    assert alias["kind"] == "alias"
    found = {(r["host_a"], r["host_b"]) for r in result.confirmed().to_pylist()}
    assert (primary, hosts["partial"]["host"]) in found
