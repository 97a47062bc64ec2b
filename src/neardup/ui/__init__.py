"""The local web UI: search pages, open clusters, diff near-duplicates, browse mirrors,
collections and a rolled-up search.

`create_app(run)` builds the FastAPI application; `neardup ui RUN` serves it with uvicorn
on 127.0.0.1. Pages are rendered on the server (Jinja2) with no external asset.
"""

from neardup.ui.app import create_app

__all__ = ["create_app"]
