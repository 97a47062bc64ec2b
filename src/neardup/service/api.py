"""HTTP API of the duplicate service (FastAPI; OpenAPI at /api/openapi.json, docs at /api/docs).

Reads are open; writes need `Authorization: Bearer <token>` (fixed when the server starts).
Host, rate, token and body size are judged by the shared door (`neardup/door.py`) from the
headers, before the app reads a body byte. The request models (`service/api_models.py`) are
the published schema, and every error, whoever raises it, has the one body `Error`, so the
OpenAPI document says exactly what the API accepts and answers (checked by a schemathesis
run in `tests/service/test_openapi_fuzz.py`). `POST /pages` also takes its batch as an
Arrow IPC stream (`service/bulk_body.py`, the route class `PagesRoute`), listed as a second
request body and held to the same model and errors. The two rules of `POST /pages` that
JSON Schema cannot state have statuses of their own, listed for the route: 404 for
`links_in` alone on a URL the index does not hold (the page to update is not there), 409 for
a page redirecting to itself (the page as sent conflicts with itself). Neither is a 422,
which says the request breaks its schema: these requests keep it. The docs page's Swagger
UI assets come from the `fastapi-offline` package, so it works without a CDN.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Coroutine
from pathlib import Path
from typing import Annotated, Any

from fastapi import Body, Depends, FastAPI, Query, Request
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from fastapi.security import HTTPBearer
from fastapi_offline import FastAPIOffline
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException

from neardup.door import (
    ANY_REQUEST,
    MAX_BODY,
    PROTECTED,
    Door,
    DoorConfig,
    refusal_responses,
)
from neardup.index.service_index import ServiceIndex
from neardup.index.state.prepare import prepare_batch
from neardup.index.state.read_records import as_dict
from neardup.index.state.updates import PageUpdate, SelfRedirect, ServiceError, UnknownPage
from neardup.kernels.jit import start as start_jit
from neardup.service.api_models import (
    MAX_URL,
    TAGS,
    CheckIn,
    CheckResultOut,
    CheckText,
    GroupId,
    GroupViewOut,
    PagesIn,
    RemoveIn,
    SummaryOut,
    Url,
    UrlStatusOut,
    answer,
    error_responses,
    page_updates,
)
from neardup.service.bulk_body import ARROW_STREAM, read_arrow_pages
from neardup.service.served import Served

WRITES = frozenset({("POST", "/pages"), ("DELETE", "/pages")})
# The status of each update the index refuses although it keeps the schema (see above).
REFUSED = {UnknownPage: 404, SelfRedirect: 409}
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


def http_error(_: Request, exc: Exception) -> ErrorResponse:
    """Any HTTPException (404, 405, ...) with the one error body, its headers kept (a 405's
    `Allow` is then set by the door to every method of the path)."""
    assert isinstance(exc, HTTPException)
    return ErrorResponse(
        {"detail": str(exc.detail)}, status_code=exc.status_code, headers=exc.headers
    )


def service_error(_: Request, exc: Exception) -> ErrorResponse:
    """An update the index refuses, with its reason: 404 or 409 for the two rules the schema
    cannot state (`REFUSED`), 422 for anything else (a Python caller's bad update)."""
    return ErrorResponse({"detail": str(exc)}, status_code=REFUSED.get(type(exc), 422))


ARROW_SCHEMA: dict[str, Any] = {
    "type": "string",
    "format": "binary",
    "description": "an Arrow IPC stream, uncompressed, with a column url (string) and any of "
    "text, html, redirect_to (string) and links_in (integer); a null is an absent field",
}


class PagesRoute(APIRoute):
    """`POST /pages`, whose body is JSON (FastAPI's own handler and the published model) or
    an Arrow IPC stream (`bulk_body.read_arrow_pages`), chosen by `Content-Type`. A route
    class because FastAPI reads a body by one model before any code of the route runs."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        as_json = super().get_route_handler()

        async def handler(request: Request) -> Response:
            media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
            if media != ARROW_STREAM:
                return await as_json(request)
            body = await request.body()
            ix: Served = request.app.state.index
            # Reading the stream and applying it are both work: off the event loop.
            report = await run_in_threadpool(lambda: ix.apply(read_arrow_pages(body)))
            return JSONResponse(report.to_dict())

        return handler


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
    opened = index if isinstance(index, ServiceIndex) else ServiceIndex(index)
    # A server runs its kernels in threads for as long as it lives: on numba's JIT from
    # the start, where the kernels marked nogil run side by side (the module compiled ahead
    # holds the interpreter lock; kernels/jit.py). Then the sketch kernels and the
    # character table are loaded now, not in the first request.
    start_jit()
    prepare_batch([PageUpdate("warm-up:", text="warm up")], opened.settings, opened.options.dims)
    ix = Served(opened)  # two copies when it writes: reads never wait for a batch
    app = FastAPIOffline(
        title="neardup service",
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
        static_url="/api/docs/static",
        responses=refusal_responses(*ANY_REQUEST),  # the door's, on every route
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

    @app.get(
        "/status",
        responses=error_responses(404, 422, described={404: "unknown url"}),
    )
    async def status(url: Annotated[Url, Query(max_length=MAX_URL)]) -> UrlStatusOut:
        """Group, winner and duplicate status of a stored URL."""
        out = ix.read(lambda copy: copy.status(url))
        if out is None:
            raise HTTPException(404, f"unknown url: {url}")
        return answer(UrlStatusOut, out)

    @app.post("/check", responses=error_responses(422))
    def check(body: Annotated[CheckIn, Body()]) -> CheckResultOut:
        """Would this text (or html) be a duplicate? Nothing is stored."""
        if isinstance(body, CheckText):
            out = ix.read(lambda copy: copy.check(text=body.text), locked=False)
        else:
            out = ix.read(lambda copy: copy.check(html=body.html), locked=False)
        return answer(CheckResultOut, out)

    token = [Depends(bearer)]  # documents the bearer scheme; the door checks the token
    refused = refusal_responses(*PROTECTED)
    rules = {
        404: "links_in alone for a URL the index does not hold: no page to update",
        409: "a page redirecting to itself",
    }

    def add_pages(body: PagesIn) -> dict[str, Any]:
        """Add or update a batch of pages (one transaction; for a URL given twice, the
        last entry wins). Each page gives exactly one of text, html or redirect_to, or only
        links_in for a page the index holds (else 404); a page may not redirect to itself
        (409). Either refusal leaves the whole batch unapplied. The batch comes as JSON or,
        without a JSON object per page, as an Arrow IPC stream
        (`application/vnd.apache.arrow.stream`) of the columns url, text, html, redirect_to
        and links_in, a null being an absent field, under the same rules and errors (`loc`
        names the row)."""
        return ix.apply(page_updates(body.pages)).to_dict()

    app.router.add_api_route(
        "/pages",
        add_pages,
        methods=["POST"],
        dependencies=token,
        responses={**refused, **error_responses(404, 409, 422, described=rules)},
        openapi_extra={"requestBody": {"content": {ARROW_STREAM: {"schema": ARROW_SCHEMA}}}},
        route_class_override=PagesRoute,
    )

    @app.delete("/pages", dependencies=token, responses={**refused, **error_responses(422)})
    def remove_pages(body: RemoveIn) -> dict[str, Any]:
        """Mark pages gone; a winner's group elects a new winner."""
        return ix.apply([PageUpdate(u, remove=True) for u in body.urls]).to_dict()

    @app.get(
        "/groups/{group_id}",
        responses=error_responses(404, 422, described={404: "unknown group"}),
    )
    async def group(group_id: Annotated[GroupId, PathParam()]) -> GroupViewOut:
        """A group: winner, members with their resemblance to it, redirects into it."""
        out = ix.read(lambda copy: copy.group(group_id))
        if out is None:
            raise HTTPException(404, f"unknown group: {group_id}")
        return answer(GroupViewOut, out)

    @app.get("/")
    def summary() -> SummaryOut:
        """The store, its counts and its sketch settings."""
        return ix.read(
            lambda copy: SummaryOut(
                store=str(copy.store),
                **as_dict(copy.counts()),
                threshold=copy.threshold,
                bands=copy.bands,
                rows=copy.rows,
            )
        )

    return app
