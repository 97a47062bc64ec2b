"""The web UI's word index (`neardup.ui.search_index`) against a plain reference, and its life:
built once, reused while the run is unchanged, rebuilt when it changes, never half read.

The reference is written here from the definition, not from the module: a page matches a
query when, for every query word, the words of that query word (runs of letters and digits,
lower-cased) occur one after the other among the words of the page's text, the last one
possibly only as a beginning when the query word ends in `*`. Hits are ranked as the ILIKE
search ranked them: by whether the title holds every query word, then whether the URL does,
then `doc_id`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from neardup import cache_folder
from neardup.store import RunError, open_run
from neardup.ui import search_index
from neardup.ui.search_index import INDEX_NAME, Query, ensure_index

QUERIES = [
    "example pyref",  # in titles, in URLs only, in texts only: all three ranks
    "socket",
    "SOCKET",  # case does not matter
    "socket server",  # two words, anywhere in the text
    "socket.socket",  # a word with a separator: the two words in a row
    "sock*",  # the beginning of a word
    "urllib.request*",
    "library -- ?",  # words without a letter or digit are ignored
    "python 3",
    "zzzqqq",  # nowhere
]


def _words(text: str) -> list[str]:
    return re.findall(r"[^\W_]+", text.lower())


def _holds(text: str, q: str) -> bool:
    """Every query word of `q` in `text` (the reference definition, see module doc)."""
    have = _words(text)
    for raw in q.split():
        want = _words(raw)
        if not want:
            continue
        prefix = raw.endswith("*")
        n = len(want)

        def at(i: int, want=want, prefix=prefix, n=n) -> bool:
            head = have[i : i + n - 1] == want[:-1]
            last = have[i + n - 1]
            return head and (last.startswith(want[-1]) if prefix else last == want[-1])

        if not any(at(i) for i in range(len(have) - n + 1)):
            return False
    return True


def reference(run: Path, q: str) -> list[int]:
    texts = pq.read_table(run / "page_text.parquet").to_pylist()
    pages = {p["doc_id"]: p for p in pq.read_table(run / "pages.parquet").to_pylist()}
    if not any(_words(w) for w in q.split()):
        return []
    hits = [t["doc_id"] for t in texts if _holds(t["text"], q)]
    return sorted(
        hits,
        key=lambda d: (
            not _holds(pages[d]["title"] or "", q),
            not _holds(pages[d]["url"] or "", q),
            d,
        ),
    )


@pytest.fixture
def run(demo_run, tmp_path, monkeypatch) -> Path:
    """A private copy of the demo run without a search index (an earlier test may have
    built one in the shared run), with neardup's cache folder in the test's folder."""
    monkeypatch.setenv(cache_folder.CACHE_ENV, str(tmp_path / "cache"))
    copy = tmp_path / "run"
    shutil.copytree(
        demo_run.path, copy, ignore=shutil.ignore_patterns(INDEX_NAME, f".{INDEX_NAME}.*")
    )
    return copy


def _index(run: Path) -> Path:
    con = open_run(run)
    try:
        return ensure_index(run, con)
    finally:
        con.close()


def test_index_finds_what_the_reference_finds_in_its_order(run):
    index = _index(run)
    assert index == run / INDEX_NAME
    ranks_seen = set()
    for q in QUERIES:
        expected = reference(run, q)
        got = search_index.search(index, Query.parse(q), 10**6, 0)
        assert got == expected, q
        if q == "example pyref":
            pages = pq.read_table(run / "pages.parquet").to_pylist()
            by_id = {p["doc_id"]: p for p in pages}
            for d in got:
                title, url = by_id[d]["title"] or "", by_id[d]["url"] or ""
                ranks_seen.add((_holds(title, q), _holds(url, q)))
            assert len(got) > 25  # more than a page
    assert len(ranks_seen) == 4, "the demo crawl exercises every rank"
    phrase, word, prefix = (set(reference(run, q)) for q in ("socket.socket", "socket", "sock*"))
    assert phrase and phrase < word <= prefix
    assert reference(run, "zzzqqq") == [] and reference(run, "library -- ?") != []


def test_a_run_named_by_a_relative_path(run, monkeypatch):
    """`neardup ui run/` from the folder above: the index is found and read all the same."""
    monkeypatch.chdir(run.parent)
    index = _index(Path(run.name))
    assert not index.is_absolute() and index.resolve() == run / INDEX_NAME
    assert search_index.search(index, Query.parse("socket"), 10**6, 0) == reference(run, "socket")
    assert _index(Path(run.name)).stat().st_ino == index.stat().st_ino  # found, not rebuilt


@pytest.mark.parametrize(("batch", "most"), [(500, 20_000), (3, 20_000), (3, 2)])
def test_pages_of_hits_cut_the_ranked_list_anywhere(run, monkeypatch, batch, most):
    """Every (offset, limit) window, across the boundaries between ranks, is the slice of the
    whole ranked list, whether title and URL candidates are probed in one batch or in many,
    or the text hits walked once (a prefix, or too many candidates to probe)."""
    monkeypatch.setattr(search_index, "PROBE_BATCH", batch)
    monkeypatch.setattr(search_index, "PROBE_MAX", most)
    index = _index(run)
    for q in ("example pyref", "exam* pyr*"):
        query = Query.parse(q)
        everything = search_index.search(index, query, 10**6, 0)
        assert everything == reference(run, q), q
        for limit in (1, 7, 25):
            for offset in range(0, len(everything) + 3, 3):
                got = search_index.search(index, query, limit, offset)
                assert got == everything[offset : offset + limit], (q, limit, offset)


def test_api_pages_through_every_hit_with_snippets(run):
    from fastapi.testclient import TestClient

    from neardup.ui import create_app

    client = TestClient(create_app(run), base_url="http://127.0.0.1")
    q = "example pyref"
    got, page = [], 1
    while True:
        body = client.get("/api/search", params={"q": q, "page": page}).json()
        assert body["field"] == "text"
        got += body["rows"]
        if not body["has_more"]:
            break
        page += 1
    assert [r["doc_id"] for r in got] == reference(run, q) and page > 1
    texts = {t["doc_id"]: t["text"] for t in pq.read_table(run / "page_text.parquet").to_pylist()}
    for r in got:  # the snippet is the text around the first word, white space collapsed
        assert "example" in _words(r["snippet"])
        assert r["snippet"] in re.sub(r"\s+", " ", texts[r["doc_id"]])
    nothing = client.get("/api/search", params={"q": "-- ?"}).json()
    assert nothing["rows"] == [] and not nothing["has_more"]
    html = client.get("/search", params={"q": "zzzqqq"}).text
    assert "No page matches." in html


def test_index_is_reused_then_rebuilt_when_the_run_changes(run):
    index = _index(run)
    built = index.stat()
    assert _index(run).stat().st_ino == built.st_ino  # up to date: opened, not rebuilt
    summary = run / "summary.json"
    summary.write_text(summary.read_text() + "\n")  # a run written again
    again = _index(run)
    rebuilt = again.stat().st_ino  # built beside the old one, then renamed over it
    assert again == index and rebuilt != built.st_ino
    table = run / "page_text.parquet"  # a folder of parts: one part written again
    text = sorted(table.glob("*.parquet"))[0] if table.is_dir() else table
    os.utime(text, ns=(text.stat().st_atime_ns, text.stat().st_mtime_ns + 10**9))
    assert _index(run).stat().st_ino != rebuilt
    assert search_index.info(index)["pages"] == str(pq.read_table(table).num_rows)


def test_a_broken_or_foreign_index_is_never_used(run):
    index = _index(run)
    good = search_index.search(index, Query.parse("socket"), 10**6, 0)
    index.write_bytes(index.read_bytes()[:4096])  # cut short
    assert search_index.search(_index(run), Query.parse("socket"), 10**6, 0) == good
    index.write_bytes(b"not a database at all")
    assert search_index.search(_index(run), Query.parse("socket"), 10**6, 0) == good


def test_a_killed_build_leaves_no_index_under_the_read_name(run):
    """A build killed in the middle (os._exit from its progress, as a SIGKILL would) leaves
    only its temporary file; the next open deletes it and builds the index whole."""
    code = f"""
import os, sys
from neardup.store import RunError, open_run
from neardup.ui.search_index import ensure_index
class Die:
    shown = False
    def stage(self, *a, **k): pass
    def advance(self, n): os._exit(9)
    def done(self): pass
ensure_index(__import__('pathlib').Path({str(run)!r}), open_run({str(run)!r}), None, Die())
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode == 9, proc.stderr.decode()
    assert not (run / INDEX_NAME).exists()
    left = list(run.glob(f".{INDEX_NAME}.*.tmp"))
    assert len(left) == 1
    index = _index(run)
    assert index == run / INDEX_NAME and not left[0].exists()
    assert search_index.search(index, Query.parse("socket"), 10**6, 0) == reference(run, "socket")


def test_a_build_that_cannot_write_says_so_in_one_line(run, tmp_path):
    """A write that fails (here: the folder is a file's name) is a RunError, which the CLI
    prints as one line, and leaves nothing behind."""
    con = open_run(run)
    blocked = tmp_path / "blocked"
    blocked.write_text("a file, not a folder")
    try:
        with pytest.raises(RunError, match=r"cannot build the search index in .*blocked"):
            search_index.build(con, blocked / INDEX_NAME, search_index.stamp(run))
    finally:
        con.close()


def test_an_interrupted_build_cleans_up(run):
    class Interrupt:
        shown = False

        def stage(self, *args, **kwargs):
            pass

        def advance(self, n):
            raise KeyboardInterrupt

        def done(self):
            pass

    con = open_run(run)
    try:
        with pytest.raises(KeyboardInterrupt):
            ensure_index(run, con, None, Interrupt())
    finally:
        con.close()
    assert not (run / INDEX_NAME).exists() and not list(run.glob(f".{INDEX_NAME}*"))


def test_a_run_that_cannot_hold_its_index_has_it_in_the_cache_folder(run, tmp_path, monkeypatch):
    """Where the run directory cannot be written (tests run as root, who may write anywhere:
    `os.access` says no for it), the index goes to neardup's cache folder, one folder per
    run path, and is found there on the next open."""
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != run and real_access(p, mode))
    index = _index(run)
    assert index.parent.is_relative_to(tmp_path / "cache") and index.name == INDEX_NAME
    assert not (run / INDEX_NAME).exists()
    monkeypatch.setattr(os, "access", real_access)
    assert _index(run).stat().st_ino == index.stat().st_ino  # found, not rebuilt


@pytest.mark.parametrize(
    ("q", "terms", "notes"),
    [
        ("Tarfile.Open", ((("tarfile", "open"), False),), 0),
        ("sock*  -- e-mail", ((("sock",), True), (("e", "mail"), False)), 1),
        ("?! --", (), 2),
        ("so* py*thon", ((("so",), False), (("py", "thon"), False)), 1),  # too short a prefix
        ("abc*", ((("abc",), True),), 0),
    ],
)
def test_query_words(q, terms, notes):
    query = Query.parse(q)
    assert query.terms == terms and len(query.notes) == notes


def test_notes_say_which_words_were_not_searched_as_written(run):
    from fastapi.testclient import TestClient

    from neardup.ui import create_app

    client = TestClient(create_app(run), base_url="http://127.0.0.1")
    body = client.get("/api/search", params={"q": "so* --", "field": "text"}).json()
    assert [r["doc_id"] for r in body["rows"]] == reference(run, "so")[:25]
    assert len(body["notes"]) == 2 and "'so*'" in body["notes"][0] and "'--'" in body["notes"][1]
    html = client.get("/search", params={"q": "so*"}).text
    assert "a prefix needs 3 letters or digits" in html
