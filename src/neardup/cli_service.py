"""Command-line commands for the service work (registered by `cli.py`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `neardup` application."""

    @app.command("serve")
    def serve(
        store: Annotated[Path, typer.Argument(help="Service store directory.")],
        host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port.")] = 8787,
        token: Annotated[
            str | None,
            typer.Option(
                help="Bearer token for writes (default: $NEARDUP_TOKEN; none: read-only)."
            ),
        ] = None,
        max_body: Annotated[int, typer.Option(help="Largest request body, bytes.")] = 10 << 20,
    ) -> None:
        """Serve the incremental duplicate index over HTTP (OpenAPI at /api/docs)."""
        import uvicorn

        from neardup.service.api import create_service_app

        app_ = create_service_app(store, token or os.environ.get("NEARDUP_TOKEN"), max_body)
        uvicorn.run(app_, host=host, port=port, log_level="warning")

    @app.command("add")
    def add(
        store: Annotated[Path, typer.Argument(help="Service store directory.")],
        inputs: Annotated[list[str], typer.Argument(help="Crawl files (WARC, ARC, ...).")],
        batch: Annotated[int, typer.Option(help="Pages per transaction.")] = 1000,
    ) -> None:
        """Add or update pages from crawl files (redirects included), batch by batch."""
        from neardup.ingest import extract_page, iter_records
        from neardup.service.index import PageUpdate, ServiceIndex

        totals: dict[str, float] = {}
        with ServiceIndex(store) as ix:
            pending: list[PageUpdate] = []

            def flush() -> None:
                if pending:
                    for k, v in ix.apply(pending).to_dict().items():
                        totals[k] = totals.get(k, 0) + v
                    pending.clear()

            for rec in iter_records(inputs):
                if not rec.url:
                    continue
                if rec.redirect_to:
                    pending.append(PageUpdate(rec.url, redirect_to=rec.redirect_to))
                else:
                    page = extract_page(rec, links=False)
                    if page.skipped_reason or not page.text:
                        continue
                    pending.append(PageUpdate(rec.url, text=page.text))
                if len(pending) >= batch:
                    flush()
            flush()
            typer.echo(json.dumps({**totals, **ix.counts()}))
