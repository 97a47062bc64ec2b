"""HTTP API of the duplicate service (FastAPI; OpenAPI at /api/openapi.json).

Reads are open; writes need `Authorization: Bearer <token>` (the token is fixed when the
server starts). Bodies over `max_body` bytes are refused with 413 before they are parsed, so a
client cannot make the server buffer arbitrary amounts of text.
"""

from __future__ import annotations

import hmac
from pathlib import Path
from typing import Any

from fastapi import Depends, FastAPI, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from neardup.service.index import ServiceIndex
from neardup.service.updates import PageUpdate, ServiceError, html_to_text

MAX_BODY = 10 * 1024 * 1024
MAX_BATCH = 10_000


class PageIn(BaseModel):
    url: str = Field(min_length=1, max_length=8192)
    text: str | None = None
    html: str | None = None
    redirect_to: str | None = None
    links_in: int | None = Field(default=None, ge=0)


class PagesIn(BaseModel):
    pages: list[PageIn] = Field(max_length=MAX_BATCH)


class CheckIn(BaseModel):
    text: str | None = None
    html: str | None = None


class RemoveIn(BaseModel):
    urls: list[str] = Field(min_length=1, max_length=MAX_BATCH)


def create_service_app(
    index: ServiceIndex | str | Path, token: str | None, max_body: int = MAX_BODY
) -> FastAPI:
    """The app over an open index (or a store directory). `token=None` refuses all writes."""
    ix = index if isinstance(index, ServiceIndex) else ServiceIndex(index)
    app = FastAPI(
        title="neardup service",
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
    )
    app.state.index = ix

    @app.middleware("http")
    async def limit_body(request: Request, call_next: Any) -> Any:
        length = request.headers.get("content-length")
        if length is not None:
            if not length.isdigit():
                return JSONResponse({"detail": "bad Content-Length"}, status_code=400)
            if int(length) > max_body:
                return JSONResponse(
                    {"detail": f"request body over {max_body} bytes"}, status_code=413
                )
        elif request.method in ("POST", "DELETE", "PUT"):
            body = await request.body()  # chunked: read, then judge
            if len(body) > max_body:
                return JSONResponse(
                    {"detail": f"request body over {max_body} bytes"}, status_code=413
                )
        return await call_next(request)

    def require_token(authorization: str | None = Header(default=None)) -> None:
        if token is None:
            raise HTTPException(403, "this server was started without a write token")
        if not authorization or not authorization.startswith("Bearer "):
            raise HTTPException(401, "missing bearer token", headers={"WWW-Authenticate": "Bearer"})
        if not hmac.compare_digest(authorization[7:].encode(), token.encode()):
            raise HTTPException(403, "wrong token")

    @app.get("/status")
    def status(url: str = Query(min_length=1)) -> dict[str, Any]:
        """Group, winner and duplicate status of a stored URL."""
        with ix.lock:
            out = ix.status(url)
        if out is None:
            raise HTTPException(404, f"unknown url: {url}")
        return out

    @app.post("/check")
    def check(body: CheckIn) -> dict[str, Any]:
        """Would this text (or html) be a duplicate? Nothing is stored."""
        if (body.text is None) == (body.html is None):
            raise HTTPException(422, "give exactly one of text or html")
        text = body.text if body.text is not None else html_to_text(body.html or "")
        with ix.lock:
            return ix.check(text)

    @app.post("/pages", dependencies=[Depends(require_token)])
    def add_pages(body: PagesIn) -> dict[str, Any]:
        """Add or update a batch of pages (one transaction)."""
        updates = []
        for p in body.pages:
            given = sum(x is not None for x in (p.text, p.html, p.redirect_to))
            if given != 1 and not (given == 0 and p.links_in is not None):
                raise HTTPException(422, f"{p.url}: give exactly one of text, html, redirect_to")
            updates.append(PageUpdate(p.url, p.text, p.html, p.redirect_to, p.links_in))
        try:
            return ix.apply(updates).to_dict()
        except ServiceError as exc:
            raise HTTPException(422, str(exc)) from exc

    @app.delete("/pages", dependencies=[Depends(require_token)])
    def remove_pages(body: RemoveIn) -> dict[str, Any]:
        """Mark pages gone; a winner's group elects a new winner."""
        return ix.apply([PageUpdate(u, remove=True) for u in body.urls]).to_dict()

    @app.get("/groups/{group_id}")
    def group(group_id: int) -> dict[str, Any]:
        """A group: winner, members with their resemblance to it, redirects into it."""
        with ix.lock:
            out = ix.group(group_id)
        if out is None:
            raise HTTPException(404, f"unknown group: {group_id}")
        return out

    @app.get("/")
    def summary() -> dict[str, Any]:
        with ix.lock:
            return {
                "store": str(ix.store),
                **ix.counts(),
                "threshold": ix.threshold,
                "bands": ix.bands,
                "rows": ix.rows,
            }

    return app
