"""The door of the service (`neardup/door.py`), probed through a real server on 127.0.0.1.

Every refusal is judged from the headers: the raw-socket client of `door_server` waits for
an answer before sending any body byte and counts what it had sent when the answer came, so
`sent == 0` proves the server answered without the body, and a chunked body over the cap is
cut off long before its end.
"""

from __future__ import annotations

import json
import logging
import socket
import time

import httpx
import pytest
import uvicorn
from door_server import TOKEN, running, send_streaming
from typer.testing import CliRunner

from neardup.cli.main import app as cli_app
from neardup.door import allowed_hosts, bind_warning, read_token
from neardup.service.api import WRITES

AUTH = {"Authorization": f"Bearer {TOKEN}"}
JSON = {"Content-Type": "application/json"}
BIG = 200 * 1024 * 1024  # the 200 MB chunked upload
CAP = 100_000


@pytest.fixture
def base(tmp_path):
    with running(tmp_path / "store", max_body=CAP) as url:
        yield url


def test_chunked_write_without_token_is_refused_before_any_body_byte(base):
    for headers, status in (({}, 401), ({"Authorization": "Bearer nope"}, 403)):
        ans = send_streaming(base, "POST", "/pages", {**JSON, **headers}, BIG)
        assert (ans.status, ans.sent) == (status, 0)
        assert ans.headers["connection"] == "close"
    ans = send_streaming(base, "DELETE", "/pages", JSON, BIG)
    assert (ans.status, ans.sent) == (401, 0)
    assert ans.headers["www-authenticate"] == "Bearer"


def test_read_only_server_refuses_writes_before_the_body(tmp_path):
    with running(tmp_path / "store", token=None) as url:
        ans = send_streaming(url, "POST", "/pages", {**JSON, **AUTH}, BIG)
    assert (ans.status, ans.sent) == (403, 0)


def test_chunked_body_is_cut_off_once_past_the_cap(base):
    ans = send_streaming(base, "POST", "/pages", {**JSON, **AUTH}, BIG, chunk=16 * 1024)
    assert ans.status == 413 and "100000" in ans.body.decode()
    # The answer came while the client was still sending: what it had pushed is the cap plus
    # what loopback socket buffers hold, far from the 200 MB it meant to send.
    assert CAP < ans.sent < 32 * 1024 * 1024


def test_declared_length_over_the_cap_is_refused_before_the_body(base):
    ans = send_streaming(base, "POST", "/pages", {**JSON, **AUTH}, BIG, chunked=False)
    assert (ans.status, ans.sent) == (413, 0)


def test_host_allow_list(tmp_path, base):
    for host in ("evil.example", "evil.example:80", "127.0.0.1.evil.example"):
        r = httpx.get(f"{base}/", headers={"Host": host})
        assert r.status_code == 421
        assert r.json() == {"detail": f"host not allowed: {host.split(':')[0]}"}
    for host in ("localhost", "127.0.0.1", "[::1]:8787", "LOCALHOST:1"):
        assert httpx.get(f"{base}/", headers={"Host": host}).status_code == 200
    with running(tmp_path / "s2", hosts=allowed_hosts("0.0.0.0", ["dup.internal"])) as url:
        assert httpx.get(f"{url}/", headers={"Host": "dup.internal:8787"}).status_code == 200
        assert httpx.get(f"{url}/", headers={"Host": "other.internal"}).status_code == 421


def test_wrong_host_is_refused_before_the_body(base):
    host, port = base.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(
            b"POST /pages HTTP/1.1\r\nHost: rebind.example\r\nTransfer-Encoding: chunked\r\n"
            + f"Authorization: Bearer {TOKEN}\r\n\r\n".encode()
        )
        assert sock.recv(1024).startswith(b"HTTP/1.1 421 ")


def test_rate_limit_answers_429_with_retry_after(tmp_path):
    with running(tmp_path / "store", rate="5/minute") as url:
        codes = [httpx.get(f"{url}/").status_code for _ in range(5)]
        r = httpx.get(f"{url}/")
        ans = send_streaming(url, "POST", "/pages", {**JSON, **AUTH}, BIG)
    assert codes == [200] * 5
    assert r.status_code == 429 and 1 <= int(r.headers["retry-after"]) <= 60
    assert r.json() == {"detail": "too many requests"}
    assert (ans.status, ans.sent) == (429, 0)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"pages": [{"url": "http://a/1", "text": "x", "links_in": 2147483648}]}', "links_in"),
        (b'{"pages": [{"url": "http://a/1", "text": "x", "links_in": NaN}]}', "links_in"),
        (b'{"pages": [{"url": "http://a/1", "text": "x", "links_in": "3"}]}', "links_in"),
        (b'{"pages": [{"url": "http://a/1", "text": "\\ud800"}]}', "pages.0.text"),
        (b'{"pages": [{"url": "\\udfff", "html": "<p>x</p>"}]}', "pages.0.url"),
        (b'{"pages": [{"url": "http://a/1", "text": "x", "html": "y"}]}', "exactly one of"),
        (b'{"pages": [{"url": "", "text": "x"}]}', "pages.0.url"),
        (b'{"pages": [{"url": "http://a/1", "text": "x", "extra": 1}]}', "extra"),
    ],
)
def test_bad_values_are_422_naming_the_field(base, body, field):
    r = httpx.post(f"{base}/pages", content=body, headers={**JSON, **AUTH})
    assert r.status_code == 422, r.text
    assert field in r.json()["detail"]
    assert set(r.json()) <= {"detail", "errors"}


def test_deletes_and_checks_out_of_schema_are_422_not_500(base):
    cases = [
        ("DELETE", {"urls": [""]}, "urls.0"),
        ("DELETE", {"urls": []}, "urls"),
        ("DELETE", {"urls": ["\ud800"]}, "urls.0"),
    ]
    for method, body, words in cases:
        r = httpx.request(
            method, f"{base}/pages", content=_raw_json(body), headers={**JSON, **AUTH}
        )
        assert r.status_code == 422 and words in r.json()["detail"], (body, r.text)
    r = httpx.post(f"{base}/check", json={"text": "a", "html": "b"})
    assert r.status_code == 422 and "exactly one of text or html" in r.json()["detail"]
    assert httpx.get(f"{base}/groups/-1").status_code == 422
    assert httpx.get(f"{base}/groups/{2**64}").status_code == 422


def _raw_json(body: object) -> bytes:
    """JSON that keeps a lone surrogate as its `\\udXXX` escape (as a hostile client sends)."""
    return json.dumps(body).encode()


def _documented(base: str, method: str, path: str) -> dict[str, dict]:
    return httpx.get(f"{base}/api/openapi.json").json()["paths"][path][method]["responses"]


def test_the_two_rules_the_schema_cannot_state_answer_their_documented_status(base):
    """`links_in` alone for a URL the index does not hold: 404 (no page to update); a page
    redirecting to itself: 409. Both keep the schema, so neither may be a 422 (which says it
    was broken); both are listed for POST /pages; either leaves its whole batch unapplied."""
    held = {"url": "http://a/held", "text": "a page the index holds from now on " * 3}
    assert httpx.post(f"{base}/pages", json={"pages": [held]}, headers=AUTH).status_code == 200
    gone = {"url": "http://a/gone", "text": "a page removed again " * 3}
    httpx.post(f"{base}/pages", json={"pages": [gone]}, headers=AUTH)
    httpx.request("DELETE", f"{base}/pages", json={"urls": [gone["url"]]}, headers=AUTH)
    fresh = {"url": "http://a/fresh", "text": "a new page in the same batch " * 3}
    cases = [
        ({"url": "http://new/1", "links_in": 3}, 404, "not in the index"),
        ({"url": gone["url"], "links_in": 3}, 404, "not in the index"),  # held, but removed
        ({"url": "http://a/1", "redirect_to": "http://a/1"}, 409, "redirects to itself"),
    ]
    for page, status, words in cases:
        r = httpx.post(f"{base}/pages", json={"pages": [fresh, page]}, headers=AUTH)
        assert r.status_code == status and words in r.json()["detail"], (page, r.text)
    assert httpx.get(f"{base}/status", params={"url": fresh["url"]}).status_code == 404
    broken = {**held, "text": None}  # null is not a text: the schema's refusal stays 422
    r = httpx.post(f"{base}/pages", json={"pages": [broken]}, headers=AUTH)
    assert r.status_code == 422 and "text" in r.json()["detail"]
    update = {"url": held["url"], "links_in": 7}  # the rule kept: a page the index holds
    assert httpx.post(f"{base}/pages", json={"pages": [update]}, headers=AUTH).status_code == 200
    listed = _documented(base, "post", "/pages")
    assert "does not hold" in listed["404"]["description"]
    assert "itself" in listed["409"]["description"]
    for status in ("404", "409"):
        assert listed[status]["content"]["application/json"]["schema"] == {
            "$ref": "#/components/schemas/Error"
        }


def test_405_lists_every_method_of_the_path(base):
    r = httpx.put(f"{base}/pages", headers=AUTH)
    assert r.status_code == 405
    assert r.headers["allow"] == "DELETE, POST"
    assert r.json() == {"detail": "Method Not Allowed"}
    for method, path in (("POST", "/status"), ("TRACE", "/groups/1"), ("DELETE", "/api/docs")):
        r = httpx.request(method, f"{base}{path}")
        assert (r.status_code, r.headers.get("allow")) == (405, "GET"), (method, path)


def test_every_route_lists_the_doors_refusals(base):
    """The door may refuse any request (400, 413, 421, 429) and a write (401, 403): each
    operation of the document lists those it can get, with their headers."""
    paths = httpx.get(f"{base}/api/openapi.json").json()["paths"]
    for path, methods in paths.items():
        for method, op in methods.items():
            codes = set(op["responses"])
            assert {"400", "413", "421", "429"} <= codes, (method, path)
            assert ({"401", "403"} <= codes) == ((method.upper(), path) in WRITES)
            assert "Retry-After" in op["responses"]["429"]["headers"]


def access_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "neardup.access"]


def test_access_log_has_one_line_per_request_without_the_token(base, caplog):
    caplog.set_level(logging.INFO, logger="neardup.access")
    httpx.post(f"{base}/pages?token={TOKEN}", json={"pages": []}, headers=AUTH)
    httpx.get(f"{base}/status", params={"url": "http://nope/"})
    # The line is written once the answer is sent, so it may trail the client a little.
    deadline = time.monotonic() + 10
    while len(lines := access_lines(caplog)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(lines) == 2
    client, method, path, status, size, ms = lines[0].split()
    assert (client, method, path, status) == ("127.0.0.1", "POST", "/pages", "200")
    assert int(size) > 0 and float(ms) >= 0
    assert lines[1].split()[1:4] == ["GET", "/status", "404"]
    assert not any(TOKEN in line for line in lines)


def test_docs_page_needs_no_cdn(base):
    page = httpx.get(f"{base}/api/docs").text
    assert "cdn." not in page and "/api/docs/static/swagger-ui-bundle.js" in page
    js = httpx.get(f"{base}/api/docs/static/swagger-ui-bundle.js")
    assert js.status_code == 200 and "SwaggerUIBundle" in js.text[:2000]


def test_token_sources_and_bind_warning(tmp_path, monkeypatch):
    f = tmp_path / "token"
    f.write_text("from-file\n")
    assert read_token("flag", str(f), "env") == "flag"
    assert read_token(None, str(f), "env") == "from-file"
    assert read_token(None, None, "env") == "env"
    assert read_token(None, None, None) is None
    (tmp_path / "empty").write_text("\n")
    with pytest.raises(ValueError, match="empty"):
        read_token(None, str(tmp_path / "empty"), None)
    assert bind_warning("127.0.0.1", None) is None and bind_warning("::1", None) is None
    assert "EVERY interface" in (bind_warning("0.0.0.0", "t") or "")
    assert "NO token" in (bind_warning("10.1.2.3", None) or "")


def test_serve_command_wires_the_door(tmp_path, monkeypatch):
    """`serve --token-file --host 0.0.0.0 --allow-host`: loud warning, the file's token, the
    host allowed; uvicorn.run is replaced so nothing listens beyond loopback."""
    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(app=app, **kw))
    monkeypatch.delenv("NEARDUP_TOKEN", raising=False)
    f = tmp_path / "token"
    f.write_text(TOKEN + "\n")
    args = ["serve", str(tmp_path / "store"), "--host", "0.0.0.0", "--token-file", str(f)]
    more = ["--allow-host", "dup.internal", "--rate-limit", "9/second"]
    res = CliRunner().invoke(cli_app, [*args, *more])
    assert res.exit_code == 0, res.output
    assert "WARNING" in res.output and "EVERY interface" in res.output
    assert seen["host"] == "0.0.0.0" and seen["h11_max_incomplete_event_size"] > 100_000
    door = next(m for m in seen["app"].user_middleware if m.cls.__name__ == "Door")
    config = door.kwargs["config"]
    assert config.token == TOKEN and "dup.internal" in config.hosts and config.rate == "9/second"
    seen["app"].state.index.close()
    bad = CliRunner().invoke(cli_app, ["serve", str(tmp_path / "s"), "--rate-limit", "lots"])
    assert bad.exit_code != 0 and "rate-limit" in bad.output
