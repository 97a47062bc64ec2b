"""HTTP API of the duplicate service (FastAPI; OpenAPI at /api/openapi.json, docs at /api/docs).

Reads are open; writes need `Authorization: Bearer <token>` (fixed when the server starts).
Host, rate, token and body size are judged by the shared door (`service/door.py`) from the
headers, before the app reads a body byte. The request models (`service/api_models.py`) are
the published schema, and every error, whoever raises it, has the one body `Error`, so the
OpenAPI document says exactly what the API accepts and answers (checked by a schemathesis
run in `tests/service/test_openapi_fuzz.py`). The docs page's Swagger UI assets come from
the `fastapi-offline` package, so it works without a CDN.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import Body, Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from fastapi_offline import FastAPIOffline
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from neardup.service.api_models import (
    MAX_URL,
    TAGS,
    CheckIn,
    CheckText,
    GroupId,
    PagesIn,
    RemoveIn,
    Url,
    error_responses,
)
from neardup.service.door import MAX_BODY, Door, DoorConfig
from neardup.service.index import ServiceIndex
from neardup.service.prepare import prepare_batch
from neardup.service.updates import PageUpdate, ServiceError

WRITES = frozenset({("POST", "/pages"), ("DELETE", "/pages")})
DOOR = (400, 413, 421, 429)  # what the door may answer to any request
bearer = HTTPBearer(auto_error=False, description="the token given to `neardup serve`")


class ErrorResponse(JSONResponse):
    """The error body, ASCII-escaped: a refused value may hold a lone surrogate."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, separators=(",", ":")).encode()


def _where(loc: tuple[Any, ...]) -> str:
    return ".".join(str(x) for x in loc if x not in TAGS)


def validation_error(_: Request, exc: Exception) -> ErrorResponse:
    """422 naming each field at fault: `body.pages.0.links_in: Input should be ...`."""
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": [x for x in e["loc"] if x not in TAGS], "msg": e["msg"], "type": e["type"]}
        for e in exc.errors()
    ]
    detail = "; ".join(f"{_where(e['loc'])}: {e['msg']}" for e in exc.errors()[:5])
    return ErrorResponse({"detail": detail, "errors": errors}, status_code=422)


def http_error(request: Request, exc: Exception) -> ErrorResponse:
    """Any HTTPException (404, 405, ...) with the one error body, its headers kept; a 405's
    `Allow` lists every method of the path, not only the route Starlette tried last."""
    assert isinstance(exc, HTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        methods = {
            m
            for r in request.app.routes
            if isinstance(r, APIRoute) and r.path_regex.match(request.url.path)
            for m in r.methods
        }
        headers["Allow"] = ", ".join(sorted(methods))
    return ErrorResponse({"detail": str(exc.detail)}, status_code=exc.status_code, headers=headers)


def service_error(_: Request, exc: Exception) -> ErrorResponse:
    """An update the index refuses (a redirect to itself, ...): 422 with its reason."""
    return ErrorResponse({"detail": str(exc)}, status_code=422)


def create_service_app(
    index: ServiceIndex | str | Path,
    token: str | None,
    max_body: int = MAX_BODY,
    *,
    hosts: Collection[str] = (),
    rate: str | None = None,
    access_log: bool = True,
) -> FastAPI:
    """The app over an open index (or a store directory). `token=None` refuses all writes;
    `hosts` are the Host names allowed besides loopback; `rate` is a per-client limit such
    as "6000/minute" (None: no limit)."""
    ix = index if isinstance(index, ServiceIndex) else ServiceIndex(index)
    # Load the sketch kernels and the character table now, not in the first request.
    prepare_batch([PageUpdate("warm-up:", text="warm up")], ix.settings, ix.options.dims)
    app = FastAPIOffline(
        title="neardup service",
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
        static_url="/api/docs/static",
    )
    app.state.index = ix
    app.add_middleware(
        Door,
        config=DoorConfig(
            token=token,
            protect=lambda method, path: (method, path) in WRITES,
            max_body=max_body,
            hosts=tuple(hosts),
            rate=rate,
            access_log=access_log,
        ),
    )
    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(ServiceError, service_error)

    @app.get("/status", responses=error_responses(*DOOR, 404, 422))
    async def status(url: Annotated[Url, Query(max_length=MAX_URL)]) -> dict[str, Any]:
        """Group, winner and duplicate status of a stored URL."""
        out = await _quick_read(ix, ix.status, url)
        if out is None:
            raise HTTPException(404, f"unknown url: {url}")
        return out

    @app.post("/check", responses=error_responses(*DOOR, 422))
    def check(body: Annotated[CheckIn, Body()]) -> dict[str, Any]:
        """Would this text (or html) be a duplicate? Nothing is stored."""
        # not under the lock here: `check` sketches first and locks only to look up
        if isinstance(body, CheckText):
            return ix.check(text=body.text)
        return ix.check(html=body.html)

    writes = {"dependencies": [Depends(bearer)], "responses": error_responses(*DOOR, 401, 403, 422)}

    @app.post("/pages", **writes)
    def add_pages(body: PagesIn) -> dict[str, Any]:
        """Add or update a batch of pages (one transaction). Each page gives exactly one of
        text, html or redirect_to, or only links_in for a page the index holds."""
        updates = [
            PageUpdate(
                p.url,
                getattr(p, "text", None),
                getattr(p, "html", None),
                getattr(p, "redirect_to", None),
                p.links_in,
            )
            for p in body.pages
        ]
        return ix.apply(updates).to_dict()

    @app.delete("/pages", **writes)
    def remove_pages(body: RemoveIn) -> dict[str, Any]:
        """Mark pages gone; a winner's group elects a new winner."""
        return ix.apply([PageUpdate(u, remove=True) for u in body.urls]).to_dict()

    @app.get("/groups/{group_id}", responses=error_responses(*DOOR, 404, 422))
    async def group(group_id: Annotated[GroupId, PathParam()]) -> dict[str, Any]:
        """A group: winner, members with their resemblance to it, redirects into it."""
        out = await _quick_read(ix, ix.group, group_id)
        if out is None:
            raise HTTPException(404, f"unknown group: {group_id}")
        return out

    @app.get("/", responses=error_responses(*DOOR))
    def summary() -> dict[str, Any]:
        """The store, its counts and its sketch settings."""
        with ix.lock:
            return {
                "store": str(ix.store),
                **ix.counts(),
                "threshold": ix.threshold,
                "bands": ix.bands,
                "rows": ix.rows,
            }

    return app


R = TypeVar("R")


async def _quick_read(ix: ServiceIndex, read: Callable[..., R], *args: Any) -> R:
    """A read of the in-memory index (microseconds), under its lock.

    When the lock is free the read runs right here on the event loop, with no hop to the
    thread pool (which costs more than the read). When an update batch holds the lock, the
    read waits for it in the thread pool instead, so the event loop, and every other
    request, never blocks on a batch."""
    if ix.lock.acquire(blocking=False):
        try:
            return read(*args)
        finally:
            ix.lock.release()

    def locked() -> R:
        with ix.lock:
            return read(*args)

    return await run_in_threadpool(locked)
