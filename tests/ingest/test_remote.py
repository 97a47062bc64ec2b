"""Inputs where the data lives (ingest/remote.py, ingest/paths_file.py), against real servers
on loopback: an `http.server` serving a temporary folder, and moto's S3 in server mode."""

from __future__ import annotations

import gzip
import io
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, ClassVar

import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup.ingest import InputError, iter_records
from neardup.ingest.paths_file import (
    PathsFileError,
    join_base,
    read_paths_file,
    resolve_inputs,
    select,
)
from neardup.pipeline.scan import scan
from neardup.store import open_run

pytestmark = pytest.mark.timeout(180)
_REQUEST_TYPE = "application/http; msgtype=request"
_BODY = "<html><body><h1>{title}</h1><p>{text}</p></body></html>"


def write_warc(path: Path, site: str, pages: int = 4) -> None:
    """A request-first WARC, as crawlers write them: a request, then its response."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    for i in range(pages):
        url = f"http://{site}/page{i}.html"
        request = io.BytesIO(f"GET /page{i}.html HTTP/1.1\r\nHost: {site}\r\n\r\n".encode())
        writer.write_record(
            writer.create_warc_record(
                url,
                "request",
                payload=request,
                warc_content_type="application/http; msgtype=request",
            )
        )
        words = " ".join(f"word{(i * 7 + k) % 50}" for k in range(120))
        body = _BODY.format(title=f"{site} {i}", text=words).encode()
        status = "404 Not Found" if i == pages - 1 else "200 OK"
        http = StatusAndHeaders(status, [("Content-Type", "text/html")], protocol="HTTP/1.1")
        writer.write_record(
            writer.create_warc_record(url, "response", payload=io.BytesIO(body), http_headers=http)
        )
    path.write_bytes(buf.getvalue())


class _Handler(SimpleHTTPRequestHandler):
    """Serves the folder; a path in `break_once` gets half its body and a dropped
    connection on its first GET, as a flaky server or network does."""

    break_once: ClassVar[set[str]] = set()
    drop_once: ClassVar[set[str]] = set()
    break_always: ClassVar[set[str]] = set()
    status: ClassVar[dict[str, int]] = {}  # path -> the error status it answers with
    gets: ClassVar[list[str]] = []  # every GET, in order

    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.gets.append(self.path)
        if self.path in self.status:
            self.send_error(self.status[self.path])
            return
        if self.path in self.drop_once:  # no answer at all: the connection just closes
            self.drop_once.discard(self.path)
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        if self.path in self.break_once or self.path in self.break_always:
            self.break_once.discard(self.path)
            data = (Path(self.directory) / self.path.lstrip("/")).read_bytes()
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
            self.close_connection = True
            return
        super().do_GET()


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    """A folder with three WARCs and its URL on a real HTTP server on loopback."""
    root = tmp_path_factory.mktemp("served")
    for name in ("a", "b", "c"):
        write_warc(root / f"{name}.warc.gz", f"{name}.example")
    handler = partial(_Handler, directory=str(root))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def s3(served: tuple[Path, str]) -> Iterator[str]:
    """moto's S3 on loopback with bucket `crawl` holding a.warc.gz and b.warc.gz."""
    boto3 = pytest.importorskip("boto3")
    moto_server = pytest.importorskip("moto.server")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket="crawl")
        for name in ("a", "b"):
            client.put_object(
                Bucket="crawl",
                Key=f"data/{name}.warc.gz",
                Body=(served[0] / f"{name}.warc.gz").read_bytes(),
            )
        yield "s3://crawl/data/"
    server.stop()


def neardup(*args: str, stdin: IO[bytes] | None = None) -> subprocess.CompletedProcess[str]:
    """The command line in a child process, as a user runs it."""
    command = [sys.executable, "-m", "neardup.cli.main", *args]
    return subprocess.run(command, stdin=stdin, capture_output=True, text=True, timeout=120)


def page_rows(run: Path) -> list[tuple]:
    con = open_run(run)
    try:
        return con.execute(
            "SELECT url, status, skipped_reason FROM pages ORDER BY doc_id"
        ).fetchall()
    finally:
        con.close()


def rows_from_stdin(path: Path) -> str:
    """`record_rows(["-"])` in a fresh process reading `path` on its stdin, as printed."""
    script = (
        "from neardup.ingest import iter_records\n"
        "print([(r.url, r.status, r.skipped_reason) for r in iter_records(['-'])])"
    )
    with open(path, "rb") as stdin:
        proc = subprocess.run(
            [sys.executable, "-c", script], stdin=stdin, capture_output=True, text=True, timeout=60
        )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def record_rows(paths: list[str]) -> list[tuple]:
    return [(r.url, r.status, r.skipped_reason) for r in iter_records(paths)]


def test_http_stdin_and_s3_give_the_rows_of_the_local_file(served, s3, tmp_path):
    root, base = served
    local = page_rows(scan([str(root / "a.warc.gz")], tmp_path / "local", workers=1).path)
    assert len(local) == 8 and local[1][:2] == ("http://a.example/page0.html", 200)
    assert page_rows(scan([base + "a.warc.gz"], tmp_path / "http", workers=1).path) == local
    assert page_rows(scan([s3 + "a.warc.gz"], tmp_path / "s3", workers=1).path) == local
    with open(root / "a.warc.gz", "rb") as stdin:
        proc = neardup("scan", "-", "--out", str(tmp_path / "in"), "-q", stdin=stdin)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert page_rows(tmp_path / "in") == local


def test_glob_over_s3_works_over_http_is_refused(served, s3):
    root, base = served
    both = record_rows([s3 + "*.warc.gz"])
    assert both == record_rows([str(root / "a.warc.gz"), str(root / "b.warc.gz")])
    assert {r.source for r in iter_records([s3 + "*.warc.gz"])} == {
        s3 + "a.warc.gz",
        s3 + "b.warc.gz",
    }
    with pytest.raises(InputError, match="glob is not possible over http"):
        iter_records([base + "*.warc.gz"])


def test_a_missing_url_is_one_row_and_the_rest_is_read(served):
    root, base = served
    rows = record_rows([base + "gone.warc.gz", base + "b.warc.gz"])
    assert rows[0] == (None, None, "cannot fetch: not found (HTTP 404)")
    assert rows[1:] == record_rows([str(root / "b.warc.gz")])


def test_a_broken_connection_is_retried(served):
    root, base = served
    _Handler.break_once.add("/c.warc.gz")
    rows = record_rows([base + "c.warc.gz"])
    assert "/c.warc.gz" not in _Handler.break_once  # the first GET did break
    assert rows == record_rows([str(root / "c.warc.gz")])
    _Handler.drop_once.add("/c.warc.gz")
    assert record_rows([base + "c.warc.gz"]) == rows
    assert "/c.warc.gz" not in _Handler.drop_once


def test_a_fetch_that_keeps_breaking_ends_its_file_with_one_row(served):
    root, base = served
    (root / "d.warc.gz").write_bytes((root / "a.warc.gz").read_bytes())
    _Handler.break_always.add("/d.warc.gz")
    try:
        rows = record_rows([base + "d.warc.gz", base + "b.warc.gz"])
    finally:
        _Handler.break_always.discard("/d.warc.gz")
    whole = record_rows([str(root / "a.warc.gz")])
    cut = rows.index(next(r for r in rows if (r[2] or "").startswith("unreadable record")))
    # How much of the half-body arrives before the reset is up to the HTTP client's buffers
    # (sometimes none of it); whatever records did arrive are kept, in order.
    assert 0 <= cut < len(whole)
    assert rows[:cut] == whole[:cut]
    assert "fetch failed 5 times" in rows[cut][2] and rows[cut][2].endswith("rest skipped")
    assert rows[cut + 1 :] == record_rows([str(root / "b.warc.gz")])  # and the scan goes on


def _paths_file(path: Path, entries: list[str]) -> Path:
    path.write_bytes(gzip.compress("".join(e + "\n" for e in entries).encode()))
    return path


def test_paths_file_sample_and_shard_are_deterministic(served, tmp_path):
    root, base = served
    listing = _paths_file(tmp_path / "warc.paths.gz", ["a.warc.gz", "b.warc.gz", "c.warc.gz"])
    every = read_paths_file(str(listing), base)
    assert every == [f"{base}{n}.warc.gz" for n in ("a", "b", "c")]
    sample = resolve_inputs([str(listing)], base, sample=2)
    assert len(sample) == 2 and set(sample) <= set(every)
    assert sample == resolve_inputs([str(listing)], base, sample=2)  # the same on every run
    assert sample == [e for e in every if e in sample]  # in list order
    assert resolve_inputs([str(listing)], base, shard="1/2") == [every[1]]
    assert resolve_inputs([str(listing)], base, shard="0/2") == [every[0], every[2]]
    assert join_base(select(["a.warc.gz", "b.warc.gz", "c.warc.gz"], 2, "0/2"), base) == [sample[0]]
    rows = record_rows(resolve_inputs([str(listing)], base, shard="1/2"))
    assert rows == record_rows([str(root / "b.warc.gz")])
    with pytest.raises(PathsFileError, match="shard"):
        resolve_inputs([str(listing)], base, shard="2/2")
    with pytest.raises(PathsFileError, match="paths file"):
        resolve_inputs([str(root / "a.warc.gz")], base, sample=1)


def test_a_selection_that_leaves_nothing_says_so(tmp_path):
    """An empty paths file, or a shard past the end of a short one, is refused by name
    before any work (not a later "no input given")."""
    empty = _paths_file(tmp_path / "empty.paths.gz", [])
    with pytest.raises(PathsFileError, match="lists no files"):
        resolve_inputs([str(empty)])
    short = _paths_file(tmp_path / "short.paths.gz", ["a.warc.gz", "b.warc.gz"])
    with pytest.raises(PathsFileError, match=r"--shard 2/3 selects none of 2 file\(s\)"):
        resolve_inputs([str(short)], shard="2/3")
    with pytest.raises(PathsFileError, match=r"--shard 1/2 selects none of 1 file\(s\)"):
        resolve_inputs([str(short)], sample=1, shard="1/2")
    assert len(resolve_inputs([str(short)], shard="1/3")) == 1


def test_paths_file_over_http_through_the_cli(served, tmp_path):
    root, base = served
    _paths_file(root / "warc.paths.gz", ["a.warc.gz", "b.warc.gz", "c.warc.gz"])
    out = tmp_path / "run"
    args = ["scan", base + "warc.paths.gz", "--paths-base", base, "--shard", "1/2"]
    proc = neardup(*args, "--out", str(out), "--workers", "1", "--quiet")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    local = page_rows(scan([str(root / "b.warc.gz")], tmp_path / "b", workers=1).path)
    assert page_rows(out) == local


def test_paths_file_through_the_python_api(served, tmp_path):
    """`neardup.scan` takes a paths file with sample/shard/paths_base as the CLI does: the
    same files, hence the same rows, and the inputs it records are the files listed."""
    import neardup

    root, base = served
    listing = _paths_file(tmp_path / "warc.paths.gz", ["a.warc.gz", "b.warc.gz", "c.warc.gz"])
    api = neardup.scan([listing], tmp_path / "api", workers=1, paths_base=base, shard="1/2")
    assert api.summary["inputs"] == [base + "b.warc.gz"]
    assert page_rows(api.path) == page_rows(scan([str(root / "b.warc.gz")], tmp_path / "b").path)
    sampled = neardup.scan([listing], tmp_path / "s", workers=1, paths_base=base, sample=2)
    assert sampled.summary["inputs"] == resolve_inputs([str(listing)], base, sample=2)
    with pytest.raises(neardup.PathsFileError, match="shard"):  # exported for callers
        neardup.scan([listing], tmp_path / "bad", paths_base=base, shard="5/2")
    with pytest.raises(PathsFileError, match="paths file"):
        neardup.scan([root / "a.warc.gz"], tmp_path / "bad", sample=1)
    assert not (tmp_path / "bad").exists()


def test_dedup_refuses_a_url(served, tmp_path):
    _, base = served
    proc = neardup("dedup", base + "a.warc.gz", "--out", str(tmp_path / "clean"))
    assert proc.returncode == 2
    assert "dedup reads local files only" in proc.stdout + proc.stderr


def test_jsonl_from_stdin_and_http_gives_the_rows_of_the_file(served, tmp_path):
    root, base = served
    rows = [{"url": f"http://j.example/{i}", "text": f"some words number {i}"} for i in range(3)]
    lines = "".join(json.dumps(r) + "\n" for r in rows).encode()
    (root / "t.jsonl.gz").write_bytes(gzip.compress(lines))
    local = record_rows([str(root / "t.jsonl.gz")])
    assert [r[0] for r in local] == [r["url"] for r in rows]
    assert record_rows([base + "t.jsonl.gz"]) == local
    assert rows_from_stdin(root / "t.jsonl.gz") == repr(local)


def test_parquet_over_http_is_read_in_ranges(served):
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    root, base = served
    table = pa.table({"url": ["http://p.example/1", "http://p.example/2"], "text": ["a b", "c"]})
    pq.write_table(table, root / "t.parquet")
    local = record_rows([str(root / "t.parquet")])
    assert len(local) == 2
    assert record_rows([base + "t.parquet"]) == local
    assert record_rows([base + "gone.parquet"]) == [
        (None, None, "cannot fetch: not found (HTTP 404)")
    ]


def test_progress_knows_the_size_of_a_url_and_follows_its_stream(served, s3):
    """The reading bar's total is the size the server or the store reports, and the bytes
    the readers report add up to it; stdin has no size, so no total."""
    from neardup.ingest.readers import input_bytes

    root, base = served
    size = (root / "a.warc.gz").stat().st_size + (root / "b.warc.gz").stat().st_size
    for urls in ([base + "a.warc.gz", base + "b.warc.gz"], [s3 + "*.warc.gz"]):
        assert input_bytes(urls) == size
        read: list[int] = []
        rows = [(r.url, r.status) for r in iter_records(urls, on_bytes=read.append)]
        assert len(rows) == 16 and sum(read) == size
    assert input_bytes([base + "a.warc.gz", "-"]) is None
    assert input_bytes([base + "gone.warc.gz"]) is None  # read later, where it is one row


def test_plain_jsonl_from_http_and_stdin(served, tmp_path):
    """A JSONL that is not gzipped streams as lines, with its bytes counted."""
    root, base = served
    lines = "".join(
        json.dumps({"url": f"http://p.example/{i}", "text": f"plain words {i}"}) + "\n"
        for i in range(200)
    ).encode()
    (root / "plain.jsonl").write_bytes(lines)
    local = record_rows([str(root / "plain.jsonl")])
    read: list[int] = []
    assert [
        (r.url, r.status, r.skipped_reason)
        for r in iter_records([base + "plain.jsonl"], on_bytes=read.append)
    ] == local
    assert len(local) == 200 and sum(read) == len(lines)
    assert rows_from_stdin(root / "plain.jsonl") == repr(local)


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Retries without the backoff's seconds, and a read timeout of 0.3 s."""
    from neardup.ingest import remote

    monkeypatch.setattr(remote, "BACKOFF_S", 0.01)
    monkeypatch.setattr(remote, "READ_TIMEOUT_S", 0.3)


def _reason(url: str) -> str:
    rows = record_rows([url])
    assert len(rows) == 1 and rows[0][:2] == (None, None)
    return rows[0][2]


def test_http_statuses_are_named_and_only_server_errors_retried(served, quick_retries):
    _, base = served
    _Handler.status.update({"/403.warc.gz": 403, "/500.warc.gz": 500, "/503.warc.gz": 503})
    _Handler.gets.clear()
    try:
        assert _reason(base + "403.warc.gz") == "cannot fetch: HTTP 403 Forbidden"
        assert _Handler.gets.count("/403.warc.gz") == 1  # another try cannot mend a 403
        assert _reason(base + "gone.warc.gz") == "cannot fetch: not found (HTTP 404)"
        assert _Handler.gets.count("/gone.warc.gz") == 1
        assert _reason(base + "500.warc.gz") == (
            "cannot fetch: fetch failed 5 times: HTTP 500 Internal Server Error"
        )
        assert _Handler.gets.count("/500.warc.gz") == 5
        assert _reason(base + "503.warc.gz").endswith("HTTP 503 Service Unavailable")
    finally:
        _Handler.status.clear()


def test_a_refused_connection_says_so(quick_retries):
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    reason = _reason(f"http://127.0.0.1:{port}/x.warc.gz")
    assert reason == f"cannot fetch: fetch failed 5 times: connection refused by 127.0.0.1:{port}"


def test_a_server_that_never_answers_times_out(quick_retries):
    import time

    from neardup.ingest.remote import remote_size

    with socket.socket() as silent:  # connections are accepted by the kernel, never answered
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        port = silent.getsockname()[1]
        started = time.monotonic()
        assert remote_size(f"http://127.0.0.1:{port}/x.warc.gz") is None  # the HEAD gives up
        assert time.monotonic() - started < 10
        reason = _reason(f"http://127.0.0.1:{port}/x.warc.gz")
    assert reason == (
        f"cannot fetch: fetch failed 5 times: no answer from 127.0.0.1:{port} within 0.3 s"
    )


def test_a_host_that_does_not_resolve_is_named_on_the_command_line(tmp_path):
    """`.invalid` never resolves (RFC 2606), without any network: one line, no traceback."""
    proc = neardup("scan", "https://example.invalid/x.warc.gz", "-o", str(tmp_path / "x"), "-q")
    assert proc.returncode == 1
    assert "cannot fetch: " in proc.stderr and "cannot resolve host example.invalid" in proc.stderr
    assert "Traceback" not in proc.stderr and "not found" not in proc.stderr
