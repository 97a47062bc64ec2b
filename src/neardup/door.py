"""The door of neardup's HTTP servers (`neardup serve`, `neardup ui`): what a request must pass
before an app sees it.

One ASGI middleware, shared by both apps, judges every request from its request line and
headers alone, so that a refused request costs the server no body bytes:

1. **Host allow-list** (421): a web page in a browser can point a name it controls at
   127.0.0.1 (DNS rebinding) and then talk to a loopback server as if same-origin; its
   requests still carry that name in `Host`, so only loopback names, the bound address and
   the names given with `--allow-host` get in.
2. **Rate limit** per client address (429 with `Retry-After`), a sliding window from `limits`.
3. **Token** (401 missing, 403 wrong or none configured), checked before any body byte is
   read: on main a chunked upload without a token was read whole before its 401.
4. **Body cap** (413): a `Content-Length` over the cap is refused at once; a chunked body is
   counted as it arrives and refused as soon as it passes the cap, so at most `max_body`
   bytes are ever held.

Every answer then gets one access-log line (client, method, path, status, bytes, ms) on the
`neardup.access` logger; the query string and the headers, hence the token, are never logged.
Refusals use the apps' one error body, `{"detail": "..."}`, and `refusal_responses` declares
them in each app's OpenAPI document. A 405 leaving either app gets here the `Allow` header
RFC 9110 requires, naming every method routed for its path (`allowed_methods`).
"""

from __future__ import annotations

import base64
import binascii
import hmac
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from dataclasses import dataclass, field
from typing import Any

from limits import parse
from limits.storage import MemoryStorage
from limits.strategies import SlidingWindowCounterRateLimiter
from starlette.routing import Match

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MAX_BODY = 10 * 1024 * 1024
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
WILDCARDS = frozenset({"0.0.0.0", "::", ""})
ACCESS_LOG = logging.getLogger("neardup.access")
# uvicorn settings for both servers: h11 with room for a request line holding the longest URL
# the API takes (8192 characters, up to 12 bytes each once percent-encoded), so such a request
# reaches the app's 422 rather than uvicorn's plain-text 400.
UVICORN_OPTIONS: dict[str, Any] = {"http": "h11", "h11_max_incomplete_event_size": 128 * 1024}
# What the door may answer: any request (ANY_REQUEST), and a protected one (PROTECTED); the apps
# list these in their OpenAPI documents through `refusal_responses`.
ANY_REQUEST = (400, 413, 421, 429)
PROTECTED = (401, 403)
REFUSALS: dict[int, str] = {
    400: "malformed request (bad Content-Length)",
    401: "missing token",
    403: "wrong token, or the server has none",
    413: "body over the server's cap",
    421: "Host not allowed (DNS rebinding guard)",
    429: "rate limit: retry after Retry-After seconds",
}
REFUSAL_HEADERS: dict[int, dict[str, Any]] = {
    401: {"WWW-Authenticate": {"description": "the scheme to use", "schema": {"type": "string"}}},
    429: {"Retry-After": {"description": "seconds to wait", "schema": {"type": "string"}}},
}
ERROR_BODY: dict[str, Any] = {
    "title": "Refusal",
    "type": "object",
    "properties": {"detail": {"type": "string"}},
    "required": ["detail"],
}


@dataclass(frozen=True)
class DoorConfig:
    """What the door lets in.

    `token`: the secret; `None` means protected requests are refused (403). `protect(method,
    path)` says which requests need it (the service: its writes; the UI: everything, when a
    token is set). `basic`: also take the token as the password of HTTP Basic auth, which a
    browser prompts for (the UI). `hosts`: names allowed in `Host` besides loopback ("*":
    any). `rate`: a `limits` string such as "6000/minute", or None for no limit (the
    command line's default is `cli/door.py`'s DEFAULT_RATE).
    """

    token: str | None = None
    protect: Callable[[str, str], bool] = field(default=lambda method, path: False)
    basic: bool = False
    max_body: int = MAX_BODY
    hosts: Collection[str] = ()
    rate: str | None = None
    access_log: bool = True


def refusal_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the door's answers with these codes. The body schema
    is written out in full (no model, no `$ref`), so that it stays `application/json` on a
    route whose own answers are HTML, where FastAPI would file a model under `text/html`."""
    return {
        c: {
            "description": REFUSALS[c],
            "content": {"application/json": {"schema": ERROR_BODY}},
            **({"headers": REFUSAL_HEADERS[c]} if c in REFUSAL_HEADERS else {}),
        }
        for c in codes
    }


def allowed_methods(scope: Scope) -> list[str]:
    """Every method the app routes for this request's path: the `Allow` of a 405 (RFC 9110
    §15.5.6). Starlette's own names only the first route whose path matched (`PUT /pages`
    got `POST`, not `DELETE, POST`), and an app's error handler may drop it altogether."""
    methods: set[str] = set()
    for route in getattr(scope.get("app"), "routes", ()):
        routed = getattr(route, "methods", None)
        if routed and route.matches(scope)[0] is not Match.NONE:
            methods |= routed
    return sorted(methods)


def is_loopback(host: str) -> bool:
    """True for an address or name that only this machine can reach."""
    return host.strip("[]").lower() in LOOPBACK_NAMES or host.startswith("127.")


def allowed_hosts(bind: str, extra: Collection[str] = ()) -> tuple[str, ...]:
    """The Host names a server bound to `bind` answers: loopback, `bind` itself unless it is a
    wildcard, and `extra` (from `--allow-host`)."""
    names = {*extra}
    if bind not in WILDCARDS:
        names.add(bind.strip("[]").lower())
    return tuple(sorted(names))


def bind_warning(bind: str, token: str | None) -> str | None:
    """A loud line for a server reachable beyond this machine, or None on loopback."""
    if is_loopback(bind):
        return None
    where = "EVERY interface" if bind in WILDCARDS else bind
    auth = "a token is required" if token else "NO token: anyone who reaches it can read"
    return f"WARNING: listening on {where}, reachable from other machines; {auth}."


def check_rate(rate: str | None) -> str | None:
    """A rate such as "6000/minute" checked by `limits`; None, "" or "off": no limit."""
    if rate is None or rate.strip().lower() in ("", "off", "none"):
        return None
    parse(rate)  # ValueError when it is not a rate
    return rate


def read_token(token: str | None, token_file: str | None, env: str | None) -> str | None:
    """The token from `--token`, else `--token-file` (first line), else `$NEARDUP_TOKEN`.

    A file keeps the secret out of the process list and the shell history."""
    if token:
        return token
    if token_file:
        with open(token_file, encoding="utf-8") as f:
            first = f.readline().strip()
        if not first:
            raise ValueError(f"{token_file}: empty token file")
        return first
    return env or None


def _host_name(value: str) -> str:
    """`example.org:8787` -> `example.org`; `[::1]:80` -> `::1`."""
    value = value.strip().lower()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


class Door:
    """The ASGI middleware: host, rate, token and body cap, then the access log."""

    def __init__(self, app: ASGIApp, config: DoorConfig) -> None:
        self.app = app
        self.config = config
        self.hosts = {h.lower().rstrip(".") for h in config.hosts} | LOOPBACK_NAMES
        rate = check_rate(config.rate)
        self.limit = parse(rate) if rate else None
        self.limiter = SlidingWindowCounterRateLimiter(MemoryStorage())

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        sent = {"status": 0, "bytes": 0}

        async def counting_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                sent["status"] = message["status"]
                if message["status"] == 405:
                    message = _with_allow(message, scope)
            elif message["type"] == "http.response.body":
                sent["bytes"] += len(message.get("body", b""))
            await send(message)

        try:
            await self._judge(scope, receive, counting_send)
        finally:
            if self.config.access_log:
                client = scope.get("client") or ("-", 0)
                ACCESS_LOG.info(
                    "%s %s %s %d %d %.1f",
                    client[0],
                    scope["method"],
                    scope["path"],
                    sent["status"],
                    sent["bytes"],
                    (time.perf_counter() - t0) * 1000,
                )

    async def _judge(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = _host_name(headers.get("host", "")).rstrip(".")
        if "*" not in self.hosts and host not in self.hosts:
            await _refuse(send, 421, f"host not allowed: {host or '(none)'}")
            return
        if self.limit is not None:
            client = (scope.get("client") or ("-", 0))[0]
            if not self.limiter.hit(self.limit, client):
                reset = self.limiter.get_window_stats(self.limit, client).reset_time
                wait = max(1, math.ceil(reset - time.time()))
                await _refuse(send, 429, "too many requests", {"retry-after": str(wait)})
                return
        if self.config.protect(scope["method"], scope["path"]):
            refusal = self._auth(headers.get("authorization"))
            if refusal is not None:
                status, detail, extra = refusal
                await _refuse(send, status, detail, extra)
                return
        cap = self.config.max_body
        length = headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                await _refuse(send, 400, "bad Content-Length")
            elif int(length) > cap:
                await _refuse(send, 413, f"request body over {cap} bytes")
            else:
                await self.app(scope, receive, send)
            return
        if "chunked" not in headers.get("transfer-encoding", "").lower():
            await self.app(scope, receive, send)
            return
        # Chunked: read up to the cap before the app does, answer 413 the moment it is passed.
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > cap:
                await _refuse(send, 413, f"request body over {cap} bytes")
                return
            if not message.get("more_body", False):
                break
        await self.app(scope, _replay(b"".join(chunks), receive), send)

    def _auth(self, header: str | None) -> tuple[int, str, dict[str, str]] | None:
        """None when the request carries the token, else (status, detail, headers)."""
        token = self.config.token
        if token is None:
            return 403, "this server was started without a token", {}
        challenge = 'Basic realm="neardup"' if self.config.basic else "Bearer"
        scheme, _, value = (header or "").partition(" ")
        given: str | None = None
        if scheme.lower() == "bearer":
            given = value.strip()
        elif scheme.lower() == "basic" and self.config.basic:
            try:
                given = base64.b64decode(value.strip(), validate=True).decode().partition(":")[2]
            except (binascii.Error, UnicodeDecodeError):
                given = ""
        if not given:
            return 401, "missing token", {"www-authenticate": challenge}
        if not hmac.compare_digest(given.encode(), token.encode()):
            return 403, "wrong token", {}
        return None


def _with_allow(start: Message, scope: Scope) -> Message:
    """A 405's `http.response.start` with `Allow` set to every method of its path."""
    methods = allowed_methods(scope)
    if not methods:
        return start  # no route to ask (not an app's 405): leave what it said
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"allow"]
    headers.append((b"allow", ", ".join(methods).encode("latin-1")))
    return {**start, "headers": headers}


def _replay(body: bytes, receive: Receive) -> Receive:
    """A `receive` that hands the app the body read already, then the real channel."""
    done = False

    async def replay() -> Message:
        nonlocal done
        if not done:
            done = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _refuse(
    send: Send, status: int, detail: str, headers: dict[str, str] | None = None
) -> None:
    """Answer with the apps' error body and close: the unread body is never drained."""
    body = json.dumps({"detail": detail}).encode()
    raw = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
        *((k.encode(), v.encode()) for k, v in (headers or {}).items()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": body})
