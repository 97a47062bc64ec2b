"""Incremental duplicate service: update cases, transactions, HTTP API, length mapping."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time

import httpx
import numpy as np
import pytest
import uvicorn
from typer.testing import CliRunner

from neardup.cli.main import app as cli_app
from neardup.config import Settings, SettingsError
from neardup.index.files.segment_rows import SLEEP_HOOK, TX_MARKER
from neardup.service import (
    PageUpdate,
    ServiceIndex,
    length_partition_report,
    winner_key,
)
from neardup.service.api import create_service_app


def doc(tag: str, n: int = 300, extra: str = "") -> str:
    return " ".join(f"{tag}{i}" for i in range(n)) + (" " + extra if extra else "")


A, B, C = doc("alpha"), doc("beta"), doc("gamma")


@pytest.fixture
def ix(tmp_path):
    index = ServiceIndex(tmp_path / "store")
    yield index
    index.close()


def test_new_pages_group_with_winner_rules(ix):
    ix.apply(
        [
            PageUpdate("http://b.example.com/page?id=1", text=A),
            PageUpdate("http://a.example.com/page", text=A + " tail"),
            PageUpdate("http://other.com/x", text=B),
        ]
    )
    s = ix.status("http://b.example.com/page?id=1")
    assert s.winner_url == "http://a.example.com/page"  # static beats dynamic
    assert s.is_duplicate and s.verified
    assert not ix.status("http://a.example.com/page").is_duplicate
    assert ix.status("http://other.com/x").group_id != s.group_id
    assert ix.consistency_errors() == []


def test_winner_key_order():
    urls = [
        ("http://x.de/a?b", 5),
        ("http://x.de/longer", 1),
        ("http://abcd.de/a", 1),
        ("http://x.co.uk/a", 1),
    ]
    best = sorted(urls, key=lambda u: winner_key(*u, (".co.uk",)))
    assert best[0] == ("http://x.de/a?b", 5)  # popularity first
    assert best[1] == ("http://x.co.uk/a", 1)  # same length: the preferred market
    assert best[2] == ("http://abcd.de/a", 1)
    assert best[3] == ("http://x.de/longer", 1)


def test_tier1_keeps_page_and_changed_page_moves(ix):
    ix.apply(
        [
            PageUpdate("http://a/1", text=A),
            PageUpdate("http://a/2", text=A),
            PageUpdate("http://c/1", text=C),
        ]
    )
    g = ix.status("http://a/2").group_id
    # Tier 1: the same sketch again is no work at all.
    rep = ix.apply([PageUpdate("http://a/2", text=A)])
    assert rep.tier1 == 1 and rep.tier2 == 0 and rep.comparisons == 0
    # A small edit changes the sketch: the graph verifies it again, and it stays.
    rep = ix.apply([PageUpdate("http://a/2", text=A + " small edit")])
    assert rep.tier1 == 0 and rep.tier2 == 1 and rep.comparisons >= 1
    assert ix.status("http://a/2").group_id == g
    rep = ix.apply([PageUpdate("http://a/2", text=C + " edit")])
    assert rep.tier2 == 1 and rep.changed == 1
    assert ix.status("http://a/2").group_id == ix.status("http://c/1").group_id
    assert ix.status("http://a/1").is_duplicate is False
    assert ix.counts().duplicate_groups == 1
    assert ix.consistency_errors() == []


def test_changed_page_founds_group_and_takes_redirects(ix):
    ix.apply(
        [
            PageUpdate("http://a/1", text=A),
            PageUpdate("http://a/2", text=A),
            PageUpdate("http://r/1", redirect_to="http://a/2"),
        ]
    )
    assert ix.status("http://r/1").group_id == ix.status("http://a/1").group_id
    ix.apply([PageUpdate("http://a/2", text=B)])
    g2 = ix.status("http://a/2").group_id
    assert g2 != ix.status("http://a/1").group_id
    assert ix.status("http://r/1").group_id == g2  # the redirect moved along
    assert ix.group(g2).redirects == ("http://r/1",)


def test_redirect_chain_and_cycle(ix):
    ix.apply(
        [
            PageUpdate("http://t/1", text=A),
            PageUpdate("http://r/1", redirect_to="http://r/2"),
            PageUpdate("http://r/2", redirect_to="http://r/3"),
            PageUpdate("http://r/3", redirect_to="http://t/1"),
            PageUpdate("http://y/1", redirect_to="http://y/2"),
            PageUpdate("http://y/2", redirect_to="http://y/1"),
        ]
    )
    s = ix.status("http://r/1")
    assert s.final_url == "http://t/1" and s.is_duplicate
    assert s.group_id == ix.status("http://t/1").group_id
    assert ix.status("http://y/1").group_id is None  # a cycle leads nowhere
    # A page that starts redirecting leaves its group.
    ix.apply([PageUpdate("http://t/2", text=A)])
    ix.apply([PageUpdate("http://t/2", redirect_to="http://t/1")])
    assert ix.group(ix.status("http://t/1").group_id).size == 1
    assert ix.consistency_errors() == []


def test_removed_winner_elects_new_winner(ix):
    ix.apply(
        [
            PageUpdate("http://a/1", text=A, links_in=9),
            PageUpdate("http://a/22", text=A),
            PageUpdate("http://a/333", text=A),
        ]
    )
    g = ix.status("http://a/22").group_id
    assert ix.group(g).winner_url == "http://a/1"
    rep = ix.apply([PageUpdate("http://a/1", remove=True)])
    assert rep.removed == 1
    assert ix.group(g).winner_url == "http://a/22"
    assert ix.status("http://a/1").removed and ix.status("http://a/1").group_id is None
    ix.apply([PageUpdate("http://a/22", remove=True), PageUpdate("http://a/333", remove=True)])
    assert ix.group(g) is None and ix.counts().groups == 0
    assert ix.consistency_errors() == []


def test_drifted_chain_is_not_one_transitive_group(tmp_path):
    # A chain x0 ~ x1 ~ ... where far ends do not resemble: transitive grouping would join
    # all eight; the scan's core rule does not, and neither may the service. A loser is a
    # duplicate only when it verifies against its winner.
    words = [f"w{i}" for i in range(2000)]
    texts = [" ".join(words[i * 30 : i * 30 + 300]) for i in range(8)]
    settings = Settings(threshold=0.7)
    with ServiceIndex(tmp_path / "s", settings) as ix:
        ix.apply([PageUpdate(f"http://c/{i}", text=t) for i, t in enumerate(texts)])
        groups = {ix.status(f"http://c/{i}").group_id for i in range(8)}
        assert 1 < len(groups) < 8
        for i in range(8):
            s = ix.status(f"http://c/{i}")
            assert s.is_duplicate == (s.winner_url != s.url and s.verified)
        assert ix.consistency_errors() == []


def test_persistence_and_settings_mismatch(tmp_path):
    with ServiceIndex(tmp_path / "s") as ix:
        ix.apply([PageUpdate("http://a/1", text=A), PageUpdate("http://a/2", text=A)])
        g = ix.status("http://a/2").group_id
    with ServiceIndex(tmp_path / "s") as ix:
        assert ix.status("http://a/2").group_id == g
        ix.apply([PageUpdate("http://a/3", text=A)])
        assert ix.status("http://a/3").group_id == g
    with pytest.raises(SettingsError, match="num_perm"):
        ServiceIndex(tmp_path / "s", Settings(num_perm=64))


def test_failed_batch_rolls_back(ix):
    ix.apply([PageUpdate("http://a/1", text=A)])
    with pytest.raises(ValueError):
        ix.apply([PageUpdate("http://a/2", text=A), PageUpdate("http://bad")])
    assert ix.status("http://a/2") is None
    assert ix.counts().pages == 1 and ix.consistency_errors() == []


KILL_SCRIPT = textwrap.dedent("""
    import sys
    from neardup.service import PageUpdate, ServiceIndex
    ix = ServiceIndex(sys.argv[1])
    A = " ".join(f"alpha{i}" for i in range(300))
    B = " ".join(f"beta{i}" for i in range(300))
    ix.apply([PageUpdate("http://a/2", text=B), PageUpdate("http://a/3", text=A),
              PageUpdate("http://a/1", remove=True)])
""")


def test_kill_during_update_keeps_last_commit(tmp_path):
    store = tmp_path / "s"
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate("http://a/1", text=A), PageUpdate("http://a/2", text=A)])
        before = {u: ix.status(u) for u in ("http://a/1", "http://a/2", "http://a/3")}
    env = {**os.environ, SLEEP_HOOK: "60"}
    proc = subprocess.Popen(
        [sys.executable, "-c", KILL_SCRIPT, str(store)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert TX_MARKER in line
    finally:
        proc.kill()
        proc.wait()
    with ServiceIndex(store) as ix:
        assert {u: ix.status(u) for u in before} == before
        assert ix.consistency_errors() == []
        ix.apply([PageUpdate("http://a/3", text=A)])  # and it goes on
        assert ix.status("http://a/3").is_duplicate


def test_length_partition_report():
    rng = np.random.default_rng(1)
    lens = rng.integers(50, 3000, size=(3000, 3))
    reps = [length_partition_report(lens, d, 6) for d in (1, 2, 3)]
    assert [r["cells"] for r in reps] == [6, 36, 216]
    assert reps[0]["avoided"] < reps[1]["avoided"] < reps[2]["avoided"]
    assert all(r["imbalance"] >= 1 for r in reps)
    same = np.array([[i, i] for i in range(50)])
    assert length_partition_report(lens, 3, 6, pairs=same)["pairs_kept"] == 1.0
    with pytest.raises(ValueError):
        length_partition_report(lens, 1, 4, slack=0.5)


def test_cli_add(tmp_path, demo_crawl):
    store = tmp_path / "s"
    res = CliRunner().invoke(cli_app, ["add", str(store), *map(str, demo_crawl.warc_paths)])
    assert res.exit_code == 0, res.output
    with ServiceIndex(store) as ix:
        assert ix.counts().pages > 10 and ix.consistency_errors() == []
        # In-links come from the crawl's own link graph (demo pages link to each other).
        assert sum(p.links_in for p in ix.pages.values()) > 0


# ------------------------------------------------------------------ HTTP API

TOKEN = "s3cret"


@pytest.fixture
def server(tmp_path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    app = create_service_app(tmp_path / "store", TOKEN, max_body=100_000)
    srv = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error"))
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    for _ in range(200):
        if srv.started:
            break
        time.sleep(0.02)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        yield client
    srv.should_exit = True
    thread.join(10)
    app.state.index.close()


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_api_roundtrip(server):
    r = server.post(
        "/pages",
        headers=AUTH,
        json={
            "pages": [
                {"url": "http://a/1", "text": A, "links_in": 3},
                {"url": "http://a/2", "html": f"<html><body><p>{A}</p></body></html>"},
                {"url": "http://r/1", "redirect_to": "http://a/2"},
            ]
        },
    )
    assert r.status_code == 200, r.text
    assert r.json()["new"] == 2
    s = server.get("/status", params={"url": "http://a/2"}).json()
    assert s["is_duplicate"] and s["winner_url"] == "http://a/1"
    g = server.get(f"/groups/{s['group_id']}").json()
    assert g["size"] == 2 and g["redirects"] == ["http://r/1"]
    c = server.post("/check", json={"text": A}).json()
    assert c["is_duplicate"] and c["winner_url"] == "http://a/1"
    assert server.post("/check", json={"text": B}).json()["is_duplicate"] is False
    assert server.get("/status", params={"url": "http://nope"}).status_code == 404
    r = server.request("DELETE", "/pages", headers=AUTH, json={"urls": ["http://a/1"]})
    assert r.status_code == 200 and r.json()["removed"] == 1
    assert server.get(f"/groups/{s['group_id']}").json()["winner_url"] == "http://a/2"
    assert "/pages" in server.get("/api/openapi.json").json()["paths"]


def test_api_rejects_bad_requests(server):
    body = {"pages": [{"url": "http://a/1", "text": A}]}
    assert server.post("/pages", json=body).status_code == 401
    bad = {"Authorization": "Bearer nope"}
    assert server.post("/pages", headers=bad, json=body).status_code == 403
    assert server.request("DELETE", "/pages", headers=bad, json={"urls": ["x"]}).status_code == 403
    big = {"pages": [{"url": "http://a/1", "text": "x " * 60_000}]}
    assert server.post("/pages", headers=AUTH, json=big).status_code == 413
    r = server.post(
        "/pages", headers={**AUTH, "Content-Type": "application/json"}, content=b"{not json"
    )
    assert r.status_code == 422
    r = server.post("/pages", headers=AUTH, json={"pages": [{"url": "http://a/1"}]})
    assert r.status_code == 422 and "text" in r.json()["detail"]
    r = server.post(
        "/pages", headers=AUTH, json={"pages": [{"url": "http://a/1", "redirect_to": "http://a/1"}]}
    )
    assert r.status_code == 409 and "itself" in r.json()["detail"]  # keeps the schema
    assert server.post("/check", json={}).status_code == 422
    assert server.get("/groups/notanumber").status_code == 422
    assert server.get("/status").status_code == 422
    assert server.get("/status", params={"url": "http://a/1"}).status_code == 404
