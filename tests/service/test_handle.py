"""`neardup.open_index`, the index in hand, against two independent references.

The same batches go through the handle into one store and through the HTTP API of a real
server on 127.0.0.1 into another; every read of the handle must equal the server's answer
(`GET /status`, `POST /check`, `GET /groups/{id}`, `GET /`), and its partition must equal
that of `neardup.scan` of the final pages written as JSONL. The pages are real text with
exact copies, light edits, drifting chains and truncations (pairs on both sides of the
threshold), HTML pages, redirects, in-link counts and removals.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import asdict
from functools import cache
from typing import Any

import httpx
import numpy as np
import pytest
from door_server import TOKEN, running

import neardup
from neardup.config import Settings
from neardup.service import DuplicateIndex, PageUpdate, ServiceError
from neardup.synth.corpus import stdlib_documents
from neardup.synth.edits import edit_document, truncate_document


def _plain(record: Any) -> Any:
    """A read's record as its JSON reads back (tuples as lists), to set beside the server's."""
    return json.loads(json.dumps(asdict(record)))


AUTH = {"Authorization": f"Bearer {TOKEN}"}


@cache
def docs() -> tuple[tuple[str, ...], ...]:
    """Three documents, each as 6 variants: the page, a copy, a 1 % edit, two links of a
    drifting chain of 3 % edits and a truncation; plus a spare variant of each that is
    never stored (for the text queries)."""
    rng = np.random.default_rng(5)
    out = []
    for doc in stdlib_documents(min_words=150, limit=3):
        link1 = edit_document(doc, rng, 0.0, 0.0, 0.03)
        link2 = edit_document(link1, rng, 0.0, 0.0, 0.03)
        variants = [
            doc,
            doc,
            edit_document(doc, rng, 0.0, 0.0, 0.01),
            link1,
            link2,
            truncate_document(doc, 0.8),
            edit_document(doc, rng, 0.0, 0.0, 0.01),  # the spare: J ≈ 0.9, clear of τ
        ]
        out.append(tuple("\n\n".join([v.title, *v.paragraphs]) for v in variants))
    return tuple(out)


def html_of(text: str) -> str:
    paras = "".join(f"<p>{p}</p>" for p in text.split("\n\n"))
    return f"<html><head><title>t</title></head><body>{paras}</body></html>"


def url(d: int, v: int) -> str:
    return f"https://h{(d + v) % 3}.example/d{d}/v{v}" + ("?q=1" if v == 2 else "")


def batches() -> list[list[dict[str, Any]]]:
    """The update sequence, as the HTTP API's page objects: adds, HTML, redirects, in-link
    counts, a change of one page to another document, and removals (a winner's among
    them, so its group elects again)."""
    d = docs()
    first = [{"url": url(i, v), "text": d[i][v]} for i in range(3) for v in range(6) if v != 4]
    second = [
        {"url": url(0, 4), "html": html_of(d[0][4])},
        {"url": url(1, 4), "text": d[1][4], "links_in": 7},
        {"url": "https://old.example/a", "redirect_to": url(0, 2)},
        {"url": "https://old.example/b", "redirect_to": url(2, 5)},
        {"url": url(0, 2), "links_in": 40},
        {"url": url(2, 3), "text": d[1][3]},  # changed: now a page of document 1
        {"url": "https://short.example/", "text": "too short to shingle"},
    ]
    third = [{"url": url(1, 0), "links_in": 90}, {"url": "https://old.example/a", "links_in": 3}]
    return [first, second, third]


def final_pages() -> dict[str, str | dict[str, str]]:
    """The live content pages after the sequence and its removals (url -> text, or the
    JSONL row's html), for the scan."""
    pages: dict[str, str | dict[str, str]] = {}
    for batch in batches():
        for p in batch:
            if "text" in p:
                pages[p["url"]] = p["text"]
            elif "html" in p:
                pages[p["url"]] = {"html": p["html"]}
    for u in REMOVED:
        pages.pop(u, None)
    return pages


REMOVED = [url(1, 0), url(2, 1), "https://never.example/"]


def status_or_none(base: str, u: str) -> dict[str, Any] | None:
    r = httpx.get(f"{base}/status", params={"url": u})
    if r.status_code == 404:
        return None
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """The handle and the server's base URL after the same updates, each its own store.
    The handle takes them in every form it accepts: dicts, tuples, `PageUpdate`."""
    root = tmp_path_factory.mktemp("handle")
    first, second, third = batches()
    with running(root / "http") as base, neardup.open_index(root / "py") as ix:
        for batch in (first, second, third):
            r = httpx.post(f"{base}/pages", json={"pages": batch}, headers=AUTH)
            assert r.status_code == 200, r.text
        r = httpx.request("DELETE", f"{base}/pages", json={"urls": REMOVED}, headers=AUTH)
        assert r.status_code == 200, r.text

        # The same batches (group ids depend on them), in every form the handle takes.
        ix.add_many([*first[:5], *((p["url"], p["text"]) for p in first[5:])])
        ix.add_many(second)
        ix.add_many([PageUpdate(p["url"], links_in=p["links_in"]) for p in third])
        ix.remove(REMOVED[0])
        ix.remove(REMOVED[1:])
        yield ix, base


def test_url_queries_equal_get_status(both):
    ix, base = both
    urls = {p["url"] for b in batches() for p in b} | set(REMOVED) | {"https://nope.example/"}
    seen = {"redirect": 0, "duplicate": 0, "removed": 0, "unknown": 0}
    for u in sorted(urls):
        mine = ix.query(url=u)
        assert (None if mine is None else _plain(mine)) == status_or_none(base, u), u
        if mine is None:
            seen["unknown"] += 1
            continue
        seen["redirect"] += bool(mine.redirect_chain)
        seen["duplicate"] += mine.is_duplicate and not mine.redirect_chain
        seen["removed"] += mine.removed
        if mine.group_id is not None and not mine.redirect_chain:
            assert mine.resemblance is not None
    assert all(seen.values()), seen  # every kind of answer was compared
    # The redirect's in-links count for its target: url(0, 2) won its group with them.
    assert ix.query(url=url(0, 0)).winner_url == url(0, 2)
    assert ix.query(url="https://old.example/a").final_url == url(0, 2)


def test_text_queries_equal_post_check(both):
    ix, base = both
    d = docs()
    probes = [d[0][6], d[1][6], d[2][6], d[1][0], d[2][4], "a text about nothing here at all"]
    dup = 0
    for text in probes:
        mine = ix.query(text=text)
        r = httpx.post(f"{base}/check", json={"text": text})
        assert r.status_code == 200 and _plain(mine) == r.json()
        if mine.is_duplicate:
            dup += 1
            # The resemblance is to the would-be group's winner, by the sketches alone.
            winner_text = ix.query(url=mine.winner_url)
            assert winner_text is not None and winner_text.group_id == mine.group_id
            assert 0.0 < mine.resemblance <= 1.0
        else:
            assert mine.group_id is None and mine.resemblance is None
    assert 3 <= dup < len(probes)
    html = html_of(d[0][6])
    mine = ix.query(html=html)
    assert _plain(mine) == httpx.post(f"{base}/check", json={"html": html}).json()
    assert mine.group_id == ix.query(text=d[0][6]).group_id


def test_resemblance_is_that_of_the_sketches_to_the_winner(both):
    ix, _ = both
    d = docs()
    texts = {u: t for u, t in final_pages().items() if isinstance(t, str)}
    mine = ix.query(text=d[0][6])
    winner = mine.winner_url
    want = neardup.sketch(d[0][6]).minhash == neardup.sketch(texts[winner]).minhash
    assert mine.resemblance == pytest.approx(float(want.mean()))
    assert ix.query(text=texts[winner]).resemblance == 1.0


def test_groups_and_counts_equal_the_server(both):
    ix, base = both
    groups = ix.groups()
    assert len(groups) >= 4 and any(len(m) > 1 for m in groups.values())
    for gid, members in groups.items():
        mine = ix.group(gid)
        assert _plain(mine) == httpx.get(f"{base}/groups/{gid}").json()
        assert {m.url for m in mine.members} == members
    assert ix.group(max(groups) + 1) is None
    assert httpx.get(f"{base}/groups/{max(groups) + 1}").status_code == 404
    summary = httpx.get(f"{base}/").json()
    assert _plain(ix.counts()) == {k: summary[k] for k in _plain(ix.counts())}
    assert ix.counts().redirects == 2


def test_groups_equal_the_scan_of_the_final_pages(both, scanned):
    ix, _ = both
    pages = final_pages()
    assert {frozenset(m) for m in ix.groups().values()} == scanned(pages, Settings())
    assert all(u in ix for u in pages) and REMOVED[0] not in ix


def test_refused_updates_leave_nothing_and_match_the_api(both, tmp_path):
    ix, base = both
    before = ix.counts()
    bad = [
        {"url": "https://x.example/", "text": "a b", "html": "<p>a b</p>"},
        {"url": "https://x.example/"},
        {"url": "https://x.example/", "links_in": 3},  # links_in alone: an unknown page
        {"url": "https://x.example/", "text": "a b", "links_in": -1},
        {"url": "https://x.example/", "text": "a b", "links_in": 2**31},
    ]
    for page in bad:
        r = httpx.post(f"{base}/pages", json={"pages": [page]}, headers=AUTH)
        assert r.status_code == (404 if page.keys() == {"url", "links_in"} else 422)
        with pytest.raises(ServiceError):
            ix.add_many([{"url": url(0, 0), "text": docs()[2][0]}, page])
    with pytest.raises(ServiceError, match="itself"):
        ix.add("https://x.example/", redirect_to="https://x.example/")
    with pytest.raises(ServiceError, match="unknown page fields"):
        ix.add_many([{"url": "https://x.example/", "body": "a b"}])
    with pytest.raises(ServiceError, match="exactly one"):
        ix.query(text="a b", url=url(0, 0))
    assert ix.counts() == before
    assert ix.query(url=url(0, 0)).group_id == ix.query(url=url(0, 1)).group_id


def test_a_closed_handle_reopens_with_its_pages(tmp_path):
    d = docs()
    with neardup.open_index(tmp_path / "idx") as ix:
        assert isinstance(ix, DuplicateIndex)
        report = ix.insert("https://a.example/", text=d[0][0])  # datasketch's name
        ix.add("https://b.example/", text=d[0][2])
        assert report.new == 1
        first = ix.query(url="https://b.example/")
    with neardup.open_index(tmp_path / "idx") as ix:  # the lock was released
        assert ix.query(url="https://b.example/") == first
        assert first.is_duplicate and first.winner_url == "https://a.example/"
        assert ix.add("https://a.example/", text=d[0][0]).tier1 == 1


def test_the_handle_needs_no_service_extra(tmp_path):
    """A plain install has the index in hand: FastAPI, uvicorn, Starlette and pydantic are
    hidden from a fresh interpreter (None in `sys.modules` fails their import)."""
    code = (
        "import sys\n"
        "for m in ('fastapi', 'uvicorn', 'starlette', 'pydantic'):\n"
        "    sys.modules[m] = None\n"
        "import neardup\n"
        "with neardup.open_index('idx') as ix:\n"
        "    ix.add('https://a.example/', text=sys.argv[1])\n"
        "    print(ix.query(text=sys.argv[1]).winner_url)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, docs()[0][0]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "https://a.example/"
