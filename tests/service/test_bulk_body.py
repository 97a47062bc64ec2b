"""`POST /pages` as an Arrow IPC stream (`service/bulk_body.py`) against the JSON form, through
a real server on 127.0.0.1.

The same pages sent as JSON and as Arrow leave the same index (every URL's status, the
counts), whose groups are the clusters of a scan of the final pages (the independent
reference); every refusal of the JSON form has the same status and the same error body as
Arrow, the row named in `loc`; a stream that is not one, is cut, compressed or has corrupt
buffers is a 422 naming the stream, and no byte flipped in a valid stream gets a 500.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pyarrow as pa
import pytest
from door_server import TOKEN, running
from fastapi.exceptions import RequestValidationError
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from neardup.config import Settings
from neardup.service.api_models import MAX_BATCH, PagesIn, page_updates
from neardup.service.bulk_body import ARROW_STREAM, arrow_body, read_arrow_pages
from neardup.synth.corpus import stdlib_documents
from neardup.synth.edits import edit_document
from neardup.synth.webtext import iter_webtext

AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {"Content-Type": "application/json", **AUTH}
ARROW = {"Content-Type": ARROW_STREAM, **AUTH}
OK = {"url": "http://a/ok", "text": "a page that keeps every rule"}


@pytest.fixture
def base(tmp_path: Path) -> Iterator[str]:
    with running(tmp_path / "store", max_body=4_000_000) as url:
        yield url


def stream(table: pa.Table, **options: Any) -> bytes:
    """`table` as an Arrow IPC stream, written as any client's Arrow library would."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema, options=pa.ipc.IpcWriteOptions(**options)) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def post_json(base: str, pages: list[dict[str, Any]]) -> httpx.Response:
    # json.dumps keeps a lone surrogate as its escape, as a hostile client sends it
    return httpx.post(f"{base}/pages", content=json.dumps({"pages": pages}), headers=JSON)


def post_arrow(base: str, body: bytes) -> httpx.Response:
    return httpx.post(f"{base}/pages", content=body, headers=ARROW, timeout=60)


def corpus() -> list[dict[str, Any]]:
    """Near-duplicates on both sides of the threshold (4 documents, copies and edits), some
    sent as HTML, and 120 web-like pages with their planted copies."""
    rng = np.random.default_rng(5)
    pages: list[dict[str, Any]] = []
    for d, doc in enumerate(stdlib_documents(min_words=150, limit=4)):
        variants = [doc, doc, edit_document(doc, rng, 0.0, 0.0, 0.01)]
        variants.append(edit_document(variants[-1], rng, 0.0, 0.0, 0.04))
        for v, var in enumerate(variants):
            text = "\n\n".join([var.title, *var.paragraphs])
            url = f"https://d{d}.example/{v}"
            if v == 1:
                paras = "".join(f"<p>{p}</p>" for p in text.split("\n\n"))
                pages.append({"url": url, "html": f"<html><body>{paras}</body></html>"})
            else:
                pages.append({"url": url, "text": text})
    pages.extend({"url": p.url, "text": p.text} for p in iter_webtext(120, seed=8))
    return pages


def changes(pages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A second batch: redirects, in-link counts alone, an edit, a URL given twice (the last
    entry wins), a new page."""
    urls = [p["url"] for p in pages]
    return [
        {"url": urls[0], "redirect_to": urls[2]},
        {"url": urls[5], "links_in": 41},
        {"url": urls[6], "text": pages[7]["text"], "links_in": 3},
        {"url": urls[20], "text": "first entry, replaced below " * 20},
        {"url": urls[20], "redirect_to": urls[21]},
        {"url": "https://new.example/x", "text": pages[8]["text"]},
    ]


def state(base: str, urls: list[str]) -> tuple[dict, dict]:
    summary = httpx.get(f"{base}/").json()
    summary.pop("store")
    status = {u: httpx.get(f"{base}/status", params={"url": u}).json() for u in urls}
    return summary, status


def test_json_and_arrow_leave_the_same_index_with_the_scans_groups(tmp_path, scanned):
    pages = corpus()
    later = changes(pages)
    urls = sorted({p["url"] for p in pages + later})
    got = {}
    for form in ("json", "arrow"):
        with running(tmp_path / form) as base:
            for batch in (pages[:50], pages[50:], later):
                r = (
                    post_json(base, batch)
                    if form == "json"
                    else post_arrow(base, arrow_body(batch))
                )
                assert r.status_code == 200, r.text
                assert r.json()["pages"] == len({p["url"] for p in batch})
            got[form] = state(base, urls)
    assert got["arrow"] == got["json"]
    summary, status = got["arrow"]
    live: dict[str, dict[str, str]] = {}  # url -> its content after both batches
    for p in pages + later:  # in order: the last entry of a URL wins
        if "redirect_to" in p:
            live.pop(p["url"])
        elif "text" in p or "html" in p:  # links_in alone keeps the content
            live[p["url"]] = {k: v for k, v in p.items() if k in ("text", "html")}
    groups: dict[int, set[str]] = {}
    for u in live:
        assert status[u]["redirect_chain"] == [], u
        groups.setdefault(status[u]["group_id"], set()).add(u)
    assert {frozenset(g) for g in groups.values()} == scanned(live, Settings())
    # Not vacuous: near-duplicates were grouped, redirects and in-link counts were taken.
    assert max(len(g) for g in groups.values()) >= 3
    assert status[urls_of(pages, 0)]["final_url"] == urls_of(pages, 2)
    assert summary["pages"] >= len(live)


def urls_of(pages: list[dict[str, Any]], i: int) -> str:
    return pages[i]["url"]


LONG = "http://a/" + "x" * 8200
REFUSALS: list[tuple[str, dict[str, Any]]] = [
    ("links_in over INTEGER", {"url": "http://a/1", "text": "x", "links_in": 2**31}),
    ("links_in negative", {"url": "http://a/1", "text": "x", "links_in": -1}),
    ("text and html", {"url": "http://a/1", "text": "x", "html": "<p>y</p>"}),
    ("text and redirect", {"url": "http://a/1", "text": "x", "redirect_to": "http://a/2"}),
    ("nothing at all", {"url": "http://a/1"}),
    ("empty url", {"url": "", "text": "x"}),
    ("url too long", {"url": LONG, "text": "x"}),
    ("empty redirect", {"url": "http://a/1", "redirect_to": ""}),
    ("redirect too long", {"url": "http://a/1", "redirect_to": LONG}),
    ("unknown field", {"url": "http://a/1", "text": "x", "extra": "y"}),
    ("no url", {"text": "x"}),
    ("links_in alone, unknown url", {"url": "http://new/1", "links_in": 3}),
    ("redirect to itself", {"url": "http://a/1", "redirect_to": "http://a/1"}),
]


@pytest.mark.parametrize("case", [c for c, _ in REFUSALS])
def test_every_refusal_of_the_json_form_is_the_same_on_arrow(base, case):
    bad = dict(REFUSALS)[case]
    rows = [OK, bad]  # the second row: the loc must name row 1
    as_json = post_json(base, rows)
    assert as_json.status_code in (404, 409, 422), as_json.text
    keys = list(dict.fromkeys(k for row in rows for k in row))
    table = pa.table({k: [row.get(k) for row in rows] for k in keys})  # the rows' columns only
    bodies = [stream(table)] + ([] if "extra" in bad else [arrow_body(rows)])  # all 5 columns
    for body in bodies:
        as_arrow = post_arrow(base, body)
        assert (as_arrow.status_code, as_arrow.json()) == (as_json.status_code, as_json.json())
    if as_json.status_code == 422:
        assert as_json.json()["errors"][0]["loc"][:3] == ["body", "pages", 1]
    # Either refusal leaves the whole batch unapplied: the good row is not stored.
    assert httpx.get(f"{base}/status", params={"url": OK["url"]}).status_code == 404


@pytest.mark.parametrize(
    ("column", "values"),
    [
        ("text", pa.array([5], pa.int64())),
        ("url", pa.array([7], pa.int32())),
        ("links_in", pa.array(["3"], pa.string())),
        ("text", pa.array([b"bytes"], pa.binary())),
        ("text", pa.array([[1, 2]], pa.list_(pa.int64()))),
    ],
)
def test_a_column_of_the_wrong_type_gets_the_json_forms_error(base, column, values):
    row: dict[str, Any] = {"url": "http://a/1", "text": "x"}
    table = pa.table({**{k: [v] for k, v in row.items()}, column: values})
    as_arrow = post_arrow(base, stream(table))
    row[column] = values.to_pylist()[0]
    if isinstance(row[column], bytes):
        row[column] = row[column].decode()  # JSON has no bytes: the nearest is a string...
        assert as_arrow.status_code == 422  # ...which JSON takes, while bytes are refused
        assert as_arrow.json()["errors"][0]["loc"] == ["body", "pages", 0, "text"]
        return
    as_json = post_json(base, [row])
    assert as_json.status_code == 422
    assert (as_arrow.status_code, as_arrow.json()) == (422, as_json.json())


def test_what_json_takes_arrow_takes_beyond_the_fast_path(base):
    """A dictionary-encoded URL column, links_in as 378.0 and small integer types are not
    the fast path's columns; row by row, the JSON form's model takes them as JSON does."""
    text = "a page about nothing in particular " * 5
    table = pa.table(
        {
            "url": pa.array(["http://a/1", "http://a/2"]).dictionary_encode(),
            "text": pa.array([text, text]),
            "links_in": pa.array([378.0, None], pa.float64()),
        }
    )
    r = post_arrow(base, stream(table))
    assert r.status_code == 200, r.text
    r = post_arrow(
        base, stream(pa.table({"url": ["http://a/2"], "links_in": pa.array([9], pa.uint8())}))
    )
    assert r.status_code == 200, r.text
    both = [
        httpx.get(f"{base}/status", params={"url": u}).json() for u in ("http://a/1", "http://a/2")
    ]
    assert both[0]["group_id"] == both[1]["group_id"]  # the same text: one group


def test_too_many_rows_is_the_json_forms_422(base):
    rows = [{"url": f"u{i}", "text": ""} for i in range(MAX_BATCH + 1)]
    as_json = post_json(base, rows)
    as_arrow = post_arrow(base, arrow_body(rows))
    assert as_json.status_code == 422
    assert (as_arrow.status_code, as_arrow.json()) == (422, as_json.json())


def test_a_string_that_is_not_utf8_is_named_by_row(base):
    """JSON's nearest case is a lone surrogate (`\\ud800`): refused as not valid Unicode at
    the same place, with the same status."""
    offsets = np.array([0, 1, 4], np.int32).tobytes()
    bad = pa.Array.from_buffers(
        pa.string(), 2, [None, pa.py_buffer(offsets), pa.py_buffer(b"a\xed\xa0\x80")]
    )
    r = post_arrow(base, stream(pa.table({"url": ["http://a/1", "http://a/2"], "text": bad})))
    as_json = post_json(base, [OK, {"url": "http://a/2", "text": "\ud800"}])
    assert r.status_code == as_json.status_code == 422
    assert (
        r.json()["errors"][0]["loc"]
        == as_json.json()["errors"][0]["loc"]
        == ["body", "pages", 1, "text"]
    )
    assert "unicode" in r.json()["detail"].lower()


def _corrupt_offsets() -> bytes:
    """A stream whose text offsets run backwards (0, 3, 1): in bounds, so the stream reads,
    but the second string would end before it starts."""
    offsets = np.array([0, 3, 1], np.int32).tobytes()
    broken = pa.Array.from_buffers(
        pa.string(), 2, [None, pa.py_buffer(offsets), pa.py_buffer(b"abc")]
    )
    return stream(pa.table({"url": ["http://a/1", "http://a/2"], "text": broken}))


@pytest.mark.parametrize(
    ("name", "make", "words"),
    [
        ("empty body", lambda: b"", "Arrow IPC stream"),
        ("not Arrow", lambda: b"hello, server", "Arrow IPC stream"),
        ("JSON with the Arrow type", lambda: json.dumps({"pages": [OK]}).encode(), "Arrow IPC"),
        ("cut short", lambda: arrow_body([OK])[:-24], "Arrow IPC stream"),
        (
            "Arrow file, not stream",
            lambda: _file(pa.table({"url": ["http://a/1"], "text": ["x"]})),
            "Arrow IPC stream",
        ),
        (
            "zstd",
            lambda: stream(pa.table({"url": ["http://a/1"], "text": ["x"]}), compression="zstd"),
            "compressed",
        ),
        (
            "lz4",
            lambda: stream(pa.table({"url": ["http://a/1"], "text": ["x"]}), compression="lz4"),
            "compressed",
        ),
        (
            "a column twice",
            lambda: stream(pa.table([["http://a/1"], ["x"], ["y"]], names=["url", "text", "text"])),
            "twice",
        ),
        ("offsets running backwards", _corrupt_offsets, "column text"),
    ],
)
def test_malformed_streams_are_422_naming_the_stream(base, name, make, words):
    r = post_arrow(base, make())
    assert r.status_code == 422, (name, r.text)
    assert words in r.json()["detail"], (name, r.text)
    assert r.json()["errors"][0]["loc"] == ["body"]
    assert "\n" not in r.json()["detail"]


def _file(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    return sink.getvalue().to_pybytes()


def test_no_flipped_byte_gets_a_500(base):
    """200 copies of a valid stream, each with a few bytes overwritten at random (seeded):
    every answer is one of the documented ones, and the server still answers after."""
    rows = [
        {"url": "http://a/1", "text": "the first page of the batch"},
        {"url": "http://a/2", "html": "<p>the second</p>", "links_in": 4},
        {"url": "http://a/3", "redirect_to": "http://a/1"},
    ]
    good = arrow_body(rows)
    rng = random.Random(26)
    seen = set()
    for _ in range(200):
        body = bytearray(good)
        for _ in range(rng.randint(1, 4)):
            body[rng.randrange(len(body))] = rng.randrange(256)
        r = post_arrow(base, bytes(body))
        assert r.status_code in (200, 404, 409, 422), r.text
        seen.add(r.status_code)
    assert 422 in seen
    assert post_arrow(base, good).status_code == 200


def test_the_door_judges_arrow_as_json(tmp_path):
    with running(tmp_path / "store", max_body=1000) as url:
        body = arrow_body([OK])
        r = httpx.post(f"{url}/pages", content=body, headers={"Content-Type": ARROW_STREAM})
        assert r.status_code == 401
        big = arrow_body([{"url": "http://a/1", "text": "x" * 2000}])
        assert post_arrow(url, big).status_code == 413
        assert post_arrow(url, body).status_code == 200
    with running(tmp_path / "ro", token=None) as url:
        assert post_arrow(url, arrow_body([OK])).status_code == 403


def test_the_openapi_document_lists_both_bodies(base):
    doc = httpx.get(f"{base}/api/openapi.json").json()
    content = doc["paths"]["/pages"]["post"]["requestBody"]["content"]
    assert content["application/json"]["schema"] == {"$ref": "#/components/schemas/PagesIn"}
    assert content[ARROW_STREAM]["schema"]["format"] == "binary"


def test_the_client_helper_refuses_unknown_fields():
    with pytest.raises(ValueError, match="extra"):
        arrow_body([{"url": "http://a/1", "text": "x", "extra": 1}])


url_value = st.sampled_from(["http://a/1", "http://a/2", "", "x" * 8192, "y" * 8193, "é" * 8192])
row = st.fixed_dictionaries(
    {"url": url_value},
    optional={
        "text": st.text(max_size=5),
        "html": st.just("<p>hi</p>"),
        "redirect_to": url_value,
        "links_in": st.sampled_from([0, 1, 2**31 - 1, 2**31, -1, 2**40]),
    },
)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(rows=st.lists(row, max_size=6), columns=st.sampled_from(["all", "given"]))
def test_the_fast_path_takes_exactly_what_the_json_model_takes(rows, columns):
    """The whole-column checks against the JSON form's model, row for row: the same pages
    taken, or the same errors, whichever columns the stream carries."""
    if columns == "all":
        body = arrow_body(rows)
    else:
        keys = ["url", *dict.fromkeys(k for r in rows for k in r if k != "url")]
        types = {"links_in": pa.int64()}
        body = stream(
            pa.table(
                {k: pa.array([r.get(k) for r in rows], types.get(k, pa.string())) for k in keys}
            )
        )
    try:
        want: Any = page_updates(TypeAdapter(PagesIn).validate_python({"pages": rows}).pages)
    except ValidationError as err:
        want = [{**e, "loc": ("body", *e["loc"])} for e in err.errors()]
    try:
        got: Any = read_arrow_pages(body)
    except RequestValidationError as err:
        got = list(err.errors())
    assert got == want
