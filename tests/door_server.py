"""Shared helpers for the door tests: a real uvicorn server on 127.0.0.1 in a thread, and a
raw-socket client that sends a body chunk by chunk and counts the bytes it had sent when the
answer arrived (httpx would send the whole body before reading any answer)."""

from __future__ import annotations

import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from neardup.door import UVICORN_OPTIONS

TOKEN = "s3cret-door-token"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def serving(app: Any) -> Iterator[str]:
    """Run `app` on 127.0.0.1 at a free port; yield its base URL; stop it after."""
    port = free_port()
    config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="error", **UVICORN_OPTIONS)
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not srv.started:
        assert time.monotonic() < deadline, "uvicorn did not start"
        assert thread.is_alive(), "uvicorn stopped"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        srv.should_exit = True
        thread.join(10)


@contextmanager
def running(store: Path, token: str | None = TOKEN, **door: Any) -> Iterator[str]:
    """The service app over `store` with `token` and door options, served on loopback."""
    from neardup.service.api import create_service_app

    app = create_service_app(store, token, **door)
    try:
        with serving(app) as base:
            yield base
    finally:
        app.state.index.close()


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes
    sent: int  # body bytes the client had sent when the answer arrived


def _read_answer(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    sock.settimeout(10)
    while b"\r\n\r\n" not in data:
        part = sock.recv(65536)
        if not part:
            break
        data += part
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        k, _, v = line.partition(":")
        headers[k.strip().lower()] = v.strip()
    want = int(headers.get("content-length", "0"))
    while len(body) < want:
        part = sock.recv(65536)
        if not part:
            break
        body += part
    return int(lines[0].split()[1]), headers, body


def send_streaming(
    base: str,
    method: str,
    path: str,
    headers: dict[str, str],
    total: int,
    chunk: int = 64 * 1024,
    chunked: bool = True,
    wait_first: float = 2.0,
) -> Answer:
    """Send a request whose body (`total` bytes of "x", chunked or with a Content-Length) is
    pushed chunk by chunk only while no answer has arrived; stop at the first answer byte.

    Before the first body byte it waits up to `wait_first` seconds for an answer, so a door
    that judges from the headers answers with `sent == 0`."""
    host, port = base.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=10)
    try:
        head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}"]
        head += [f"{k}: {v}" for k, v in headers.items()]
        head.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {total}")
        sock.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        sent = 0
        ready, _, _ = select.select([sock], [], [], wait_first)
        piece = b"x" * chunk
        frame = f"{chunk:x}\r\n".encode() + piece + b"\r\n" if chunked else piece
        while not ready and sent < total:
            try:
                sock.sendall(frame)
            except OSError:  # the server closed: read what it answered
                break
            sent += chunk
            ready, _, _ = select.select([sock], [], [], 0)
        if not ready and chunked and sent >= total:
            sock.sendall(b"0\r\n\r\n")
        status, hdrs, body = _read_answer(sock)
        return Answer(status, hdrs, body, sent)
    finally:
        sock.close()
