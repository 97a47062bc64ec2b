"""The web app: server-rendered pages and a JSON API over the same queries.

Each view calls one function of `ui.queries` and renders a Jinja2 template; `/api/...`
returns the same data as JSON, for scripts and tests. Pages are plain HTML with a few lines
of inline JavaScript and no external asset, so the UI works offline and on air-gapped hosts.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi_offline import FastAPIOffline
from starlette.exceptions import HTTPException as StarletteHTTPException

from neardup.api import resemblance
from neardup.door import (
    ANY_REQUEST,
    ERROR_BODY,
    PROTECTED,
    Door,
    DoorConfig,
    refusal_responses,
)
from neardup.linkgraph.collections import CLUSTERS_FILE, COLLECTIONS_FILE, COPIES_FILE
from neardup.linkgraph.mirrors import MIRRORS_FILE
from neardup.linkgraph.rollup import rollup
from neardup.pipeline.progress import Progress
from neardup.report.templates import environment
from neardup.ui import queries as q
from neardup.ui.diff import word_diff
from neardup.ui.store import RunStore

PageNo = Annotated[int, Query(ge=1, le=1_000_000)]
RESULTS_TO_ROLL_UP = 50


def _render(name: str, request: Request, status: int = 200, **ctx: Any) -> HTMLResponse:
    html = (
        environment("neardup.ui")
        .get_template(name)
        .render(request=request, url_for_page=_pager(request), **ctx)
    )
    return HTMLResponse(html, status_code=status)


def _pager(request: Request):
    """`url_for_page(n)`: this URL (path and query) with its `page` parameter set to n."""

    def url_for_page(n: int) -> str:
        url = request.url.include_query_params(page=n)
        return f"{url.path}?{url.query}"

    return url_for_page


# What a view says where it would show a page's text, for a run scanned without it.
NO_TEXT = "this run keeps no page text (it was scanned with --no-text)"


def _offset(page: int) -> int:
    return (page - 1) * q.PAGE_SIZE


def _missing(what: str, html: bool = False) -> dict[int | str, dict[str, Any]]:
    """The OpenAPI entry of a route's 404: the error page for an HTML view, the JSON error
    body (`{"detail": ...}`) for the API, as the exception handler answers each."""
    media, schema = ("text/html", {"type": "string"}) if html else ("application/json", ERROR_BODY)
    return {404: {"description": what, "content": {media: {"schema": schema}}}}


def create_app(
    run: str | Path,
    cache: str | Path | None = None,
    *,
    token: str | None = None,
    hosts: Collection[str] = (),
    rate: str | None = None,
    access_log: bool = True,
    progress: Progress | None = None,
) -> FastAPI:
    """The FastAPI application serving `run` (a finished scan directory).

    Behind the service's door (`service/door.py`): only loopback names and `hosts` in
    `Host`; with a `token`, every request needs it, as a bearer token or as the password
    of HTTP Basic auth (which a browser asks for); `rate` limits each client. The first
    open of a run builds its search index, reported to `progress`."""
    store = RunStore(run, cache, progress)
    # what the views say, and link to no side by side, for a run scanned without its text
    no_text = None if store.settings.keep_text else NO_TEXT
    app = FastAPIOffline(
        title="neardup",
        docs_url="/api/docs",
        redoc_url=None,
        openapi_url="/api/openapi.json",
        static_url="/api/docs/static",
        # the door's refusals, on every route (401/403 when a token protects them all)
        responses=refusal_responses(*ANY_REQUEST, *(PROTECTED if token else ())),
    )
    app.state.store = store
    app.add_middleware(
        Door,
        config=DoorConfig(
            token=token,
            protect=lambda method, path: token is not None,
            basic=True,
            hosts=tuple(hosts),
            rate=rate,
            access_log=access_log,
        ),
    )

    @app.exception_handler(StarletteHTTPException)
    async def not_found(request: Request, exc: StarletteHTTPException) -> Response:
        if request.url.path.startswith("/api/"):
            return JSONResponse(
                {"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
            )
        return _render("error.html.j2", request, exc.status_code, message=exc.detail, title="error")

    # -- data, shared by the HTML views and the API ------------------------------------
    def search_data(text: str, field: str | None, page: int, limit: int = q.PAGE_SIZE) -> q.Page:
        where = field if field in ("url", "text") else q.guess_field(text)
        with store.cursor() as cur:
            found = q.search(cur, store.search_index, text, where, limit, (page - 1) * limit)
        if found.extra.get("field") == "text" and no_text:
            found.extra["notes"].append(no_text)
        return found

    def cluster_data(cluster_id: int, page: int) -> dict[str, Any]:
        with store.cursor() as cur:
            head = q.cluster(cur, cluster_id)
            if head is None:
                raise HTTPException(404, f"no cluster {cluster_id}")
            members = q.cluster_members(cur, cluster_id, q.PAGE_SIZE, _offset(page))
            pairs = q.cluster_pairs(cur, cluster_id)
        return {"cluster": head, "members": members.to_dict(), "pairs": pairs}

    def diff_data(a: int, b: int) -> dict[str, Any]:
        with store.cursor() as cur:
            pa_, pb = q.page(cur, a), q.page(cur, b)
            ta, tb = q.text(cur, a), q.text(cur, b)
            verified = q.pair_similarity(cur, a, b)
        if pa_ is not None and pb is not None and no_text:
            raise HTTPException(404, no_text)
        if pa_ is None or pb is None or ta is None or tb is None:
            raise HTTPException(404, f"no compared text for page {a if ta is None else b}")
        d = word_diff(ta, tb)
        return {
            "a": pa_,
            "b": pb,
            "verified_similarity": verified,
            "resemblance": resemblance(ta, tb, store.settings),
            "word_ratio": d.ratio,
            "changed_words": d.changed_words,
            "truncated": d.truncated,
            "left": d.left,
            "right": d.right,
            "_diff": d,
        }

    def rollup_data(text: str, field: str | None) -> dict[str, Any]:
        hits = search_data(text, field, 1, RESULTS_TO_ROLL_UP)
        urls = [r["url"] for r in hits.rows]
        pages = store.collection_pages()
        with store.cursor() as cur:
            entries = rollup(cur, urls, pages)
        return {"q": text, "results": len(urls), "entries": [e.to_dict() for e in entries]}

    # -- HTML views ------------------------------------------------------------------------
    @app.get("/", response_class=HTMLResponse)
    def index(request: Request, page: PageNo = 1) -> HTMLResponse:
        with store.cursor() as cur:
            counts = q.overview(cur)
            clusters = q.largest_clusters(cur, q.PAGE_SIZE, _offset(page))
        return _render(
            "index.html.j2",
            request,
            title="overview",
            counts=counts,
            clusters=clusters,
            page=page,
            summary=store.summary,
            run=str(store.run),
        )

    @app.get("/search", response_class=HTMLResponse)
    def search_view(
        request: Request,
        q_: Annotated[str, Query(alias="q")] = "",
        field: str | None = None,
        page: PageNo = 1,
    ) -> HTMLResponse:
        results = search_data(q_, field, page) if q_.strip() else None
        return _render(
            "search.html.j2", request, title="search", q=q_, field=field, results=results, page=page
        )

    @app.get(
        "/cluster/{cluster_id}", response_class=HTMLResponse, responses=_missing("no cluster", True)
    )
    def cluster_view(request: Request, cluster_id: int, page: PageNo = 1) -> HTMLResponse:
        data = cluster_data(cluster_id, page)
        return _render(
            "cluster.html.j2",
            request,
            title=f"cluster {cluster_id}",
            page=page,
            no_text=no_text,
            **data,
        )

    @app.get("/page/{doc_id}", response_class=HTMLResponse, responses=_missing("no page", True))
    def page_view(request: Request, doc_id: int) -> HTMLResponse:
        with store.cursor() as cur:
            row = q.page(cur, doc_id)
            text = q.text(cur, doc_id)
        if row is None:
            raise HTTPException(404, f"no page {doc_id}")
        return _render(
            "page.html.j2",
            request,
            title=f"page {doc_id}",
            p=row,
            text=(text or "")[:5000],
            text_len=len(text or ""),
            no_text=no_text,
        )

    @app.get("/diff", response_class=HTMLResponse, responses=_missing("no compared text", True))
    def diff_view(request: Request, a: int, b: int) -> HTMLResponse:
        data = diff_data(a, b)
        return _render(
            "diff.html.j2",
            request,
            title=f"diff {a} / {b}",
            d=data,
            left=data["_diff"].html("left"),
            right=data["_diff"].html("right"),
        )

    @app.get("/mirrors", response_class=HTMLResponse)
    def mirrors_view(request: Request, page: PageNo = 1) -> HTMLResponse:
        path = store.files()[MIRRORS_FILE]
        with store.cursor() as cur:
            rows = q.mirrors(cur, path, q.PAGE_SIZE, _offset(page))
        return _render("mirrors.html.j2", request, title="mirrors", mirrors=rows, page=page)

    @app.get("/collections", response_class=HTMLResponse)
    def collections_view(request: Request, page: PageNo = 1) -> HTMLResponse:
        path = store.files()[CLUSTERS_FILE]
        with store.cursor() as cur:
            rows = q.collections(cur, path, q.PAGE_SIZE, _offset(page))
        return _render(
            "collections.html.j2", request, title="collections", collections=rows, page=page
        )

    @app.get(
        "/collection/{cid}",
        response_class=HTMLResponse,
        responses=_missing("no collection cluster", True),
    )
    def collection_view(
        request: Request, cid: int, copy: int | None = None, page: PageNo = 1
    ) -> HTMLResponse:
        files = store.files()
        with store.cursor() as cur:
            copies = q.collection_copies(cur, files[COPIES_FILE], cid)
            if not copies:
                raise HTTPException(404, f"no collection cluster {cid}")
            chosen = copy if copy is not None else copies[0]["collection_id"]
            pages = q.collection_pages(
                cur, files[COLLECTIONS_FILE], chosen, q.PAGE_SIZE, _offset(page)
            )
        return _render(
            "collection.html.j2",
            request,
            title=f"collection {cid}",
            cid=cid,
            copies=copies,
            chosen=chosen,
            pages=pages,
            page=page,
        )

    @app.get("/rollup", response_class=HTMLResponse)
    def rollup_view(
        request: Request, q_: Annotated[str, Query(alias="q")] = "", field: str | None = None
    ) -> HTMLResponse:
        data = rollup_data(q_, field) if q_.strip() else None
        return _render("rollup.html.j2", request, title="roll-up", q=q_, field=field, data=data)

    # -- JSON API --------------------------------------------------------------------------
    @app.get("/api/summary")
    def api_summary() -> dict[str, Any]:
        with store.cursor() as cur:
            return {"run": str(store.run), "summary": store.summary, "counts": q.overview(cur)}

    @app.get("/api/search")
    def api_search(
        q_: Annotated[str, Query(alias="q", min_length=1)],
        field: str | None = None,
        page: PageNo = 1,
    ) -> dict[str, Any]:
        return search_data(q_, field, page).to_dict()

    @app.get("/api/clusters")
    def api_clusters(page: PageNo = 1) -> dict[str, Any]:
        with store.cursor() as cur:
            return q.largest_clusters(cur, q.PAGE_SIZE, _offset(page)).to_dict()

    @app.get("/api/cluster/{cluster_id}", responses=_missing("no cluster"))
    def api_cluster(cluster_id: int, page: PageNo = 1) -> dict[str, Any]:
        return cluster_data(cluster_id, page)

    @app.get("/api/page/{doc_id}", responses=_missing("no page"))
    def api_page(doc_id: int) -> dict[str, Any]:
        with store.cursor() as cur:
            row = q.page(cur, doc_id)
        if row is None:
            raise HTTPException(404, f"no page {doc_id}")
        return row

    @app.get("/api/diff", responses=_missing("no compared text for a or b"))
    def api_diff(a: int, b: int) -> dict[str, Any]:
        data = diff_data(a, b)
        data.pop("_diff")
        return data

    @app.get("/api/mirrors")
    def api_mirrors(page: PageNo = 1) -> dict[str, Any]:
        with store.cursor() as cur:
            return q.mirrors(cur, store.files()[MIRRORS_FILE], q.PAGE_SIZE, _offset(page)).to_dict()

    @app.get("/api/collections")
    def api_collections(page: PageNo = 1) -> dict[str, Any]:
        path = store.files()[CLUSTERS_FILE]
        with store.cursor() as cur:
            return q.collections(cur, path, q.PAGE_SIZE, _offset(page)).to_dict()

    @app.get("/api/rollup")
    def api_rollup(
        q_: Annotated[str, Query(alias="q", min_length=1)], field: str | None = None
    ) -> dict[str, Any]:
        return rollup_data(q_, field)

    return app
