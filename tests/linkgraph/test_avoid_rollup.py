"""The crawler avoid-list, the roll-up of search results, and the four commands."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
from graphs import crawl, site
from typer.testing import CliRunner

from neardup.cli.main import app
from neardup.linkgraph.avoid import avoid_list_from_run, build_avoid_list
from neardup.linkgraph.collections import CollectionOptions, find_collections
from neardup.linkgraph.mirrors import find_mirrors
from neardup.linkgraph.rollup import rollup, rollup_run
from neardup.store import open_run

TREE = {f"p{i}": [f"p{i + 1}"] for i in range(11)} | {"p11": []}  # a 12-page chain


def mirrored_crawl():
    """A primary, a full mirror (linking back), and a site with two copies' worth of pages."""
    primary = site("primary.example", TREE, "/doc/")
    mirror = site("mirror.example", TREE, "/doc/")
    reroot = site("big.example", TREE, "/pub/doc/")
    unique = [(f"https://big.example/own/u{i}.html", f"u{i}") for i in range(20)]
    pages = primary[0] + mirror[0] + reroot[0] + unique
    links = primary[1] + mirror[1] + reroot[1]
    links.append(("https://mirror.example/doc/p3.html", "https://primary.example/doc/p0.html"))
    return crawl(pages, links, titles={"https://primary.example/doc/p0.html": "The Manual"})


def test_avoid_list_skips_whole_mirrors_and_replica_prefixes():
    con = mirrored_crawl()
    result = build_avoid_list(con, find_collections(con), find_mirrors(con))
    entries = {e["prefix"]: e for e in result.entries.to_pylist()}
    assert entries["mirror.example/"]["reason"] == "mirror"
    assert entries["mirror.example/"]["kept"] == "primary.example"
    # big.example holds unique pages too: only its copy of the manual is skipped
    assert entries["big.example/pub/doc/"]["reason"] == "replica"
    assert "big.example/" not in entries
    assert "primary.example/" not in entries and "primary.example/doc/" not in entries
    assert (result.pages, result.bytes) == (24, 24_000)
    assert result.crawl_pages == 56


def test_rollup_groups_by_collection_and_replica():
    con = mirrored_crawl()
    pages = find_collections(con, CollectionOptions()).pages
    ranked = [
        "https://mirror.example/doc/p2.html",
        "https://big.example/own/u1.html",
        "https://primary.example/doc/p2.html",  # the same page on the primary: a replica
        "https://primary.example/doc/p5.html",  # another page of the manual
        "https://unknown.example/",
        "https://mirror.example/doc/p2.html",  # repeated: dropped
    ]
    entries = rollup(con, ranked, pages)
    assert [e.rank for e in entries] == [1, 2, 5]
    manual = entries[0]
    assert manual.group.startswith("collection:")
    assert manual.replicas == ["https://primary.example/doc/p2.html"]
    assert manual.more_pages == ["https://primary.example/doc/p5.html"]
    assert "https://primary.example/doc/p2.html" in manual.other_copies
    assert entries[1].group == "url:https://big.example/own/u1.html"
    assert not entries[2].known


def test_demo_crawl_avoid_list_and_rollup(demo_run, demo_crawl):
    hosts = demo_crawl.topology["hosts"]
    result = avoid_list_from_run(demo_run.path)
    prefixes = set(result.entries.column("prefix").to_pylist())
    assert f"{hosts['mirror']['host']}/" in prefixes
    assert f"{demo_crawl.topology['alias_host']}/" in prefixes
    assert not any(p.startswith(hosts["primary"]["host"]) for p in prefixes)
    assert 0 < result.pages < result.crawl_pages and result.bytes > 0
    con = open_run(demo_run.path)
    mirror_url, primary_url = con.sql(
        "SELECT m.url, p.url FROM pages AS m JOIN pages AS p USING (cluster_id) "
        "WHERE m.host = ? AND p.host = ? ORDER BY m.doc_id LIMIT 1",
        params=[hosts["mirror"]["host"], hosts["primary"]["host"]],
    ).fetchall()[0]
    con.close()
    entries = rollup_run(demo_run.path, [mirror_url, primary_url])
    assert len(entries) == 1 and entries[0].replicas == [primary_url]


def test_commands(demo_run, tmp_path):
    runner = CliRunner()
    run = str(demo_run.path)
    out = str(tmp_path)
    res = runner.invoke(app, ["collections", run, "--out", out])
    assert res.exit_code == 0, res.output
    assert "cardinality" in res.output
    table = pq.read_table(tmp_path / "collections.parquet")
    assert table.column_names == [
        "collection_cluster_id",
        "collection_id",
        "doc_id",
        "url",
        "host",
        "is_root",
    ]
    res = runner.invoke(app, ["mirrors", run, "--out", out, "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["confirmed_by_content_method"] >= 1
    mirrors = pq.read_table(tmp_path / "mirrors.parquet")
    assert mirrors.column_names[:5] == [
        "host_a",
        "host_b",
        "shared_pages",
        "suffix_matches",
        "kind",
    ]
    res = runner.invoke(app, ["avoid-list", run, "--out", out])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "avoid_list.txt").read_text().strip()
    urls = tmp_path / "urls.txt"
    urls.write_text("https://nowhere.example/\n")
    res = runner.invoke(app, ["rollup", run, str(urls), "--json"])
    assert res.exit_code == 0 and json.loads(res.output)[0]["known"] is False
    res = runner.invoke(app, ["rollup", run, "-"], input="https://nowhere.example/\n")
    assert res.exit_code == 0
    assert runner.invoke(app, ["collections", str(tmp_path / "nope")]).exit_code == 2
    assert runner.invoke(app, ["rollup", run, str(tmp_path / "missing.txt")]).exit_code == 2
    assert runner.invoke(app, ["collections", run, "--min-size", "0"]).exit_code == 2
