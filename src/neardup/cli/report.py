"""Command-line commands for the HTML report and the web UI (registered by `main.py`).

`report` writes one self-contained HTML file (`neardup.report`); `ui` serves the local web
app (`neardup.ui`). Both read a finished run; heavy imports (matplotlib, FastAPI) happen
inside the commands so the rest of the CLI starts fast.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from neardup.cli.door import (
    DEFAULT_RATE,
    AccessLogOpt,
    AllowHostOpt,
    RateOpt,
    TokenFileOpt,
    TokenOpt,
    announce,
    check_port,
    rate_or_none,
    resolve_token,
    run_server,
)
from neardup.cli.output import fail, out_console, require_extra
from neardup.cli.progress import RichProgress, show_progress
from neardup.store import RunError
from neardup.store.outputs import OutputError

RunArg = Annotated[Path, typer.Argument(help="run directory (from `neardup scan`)")]
ReportArg = Annotated[
    Path,
    typer.Argument(help="run directory, store of crawls, or one crawl of a store (store/crawls/L)"),
]


def report_command(
    run: ReportArg,
    out: Annotated[Path, typer.Option("--out", "-o", help="HTML file to write")] = Path(
        "report.html"
    ),
    top: Annotated[
        int, typer.Option(help="rows of the largest-clusters and collections tables")
    ] = 20,
    avoid: Annotated[
        bool,
        typer.Option(
            "--avoid/--no-avoid", help="include the avoid-list savings (computed if absent)"
        ),
    ] = True,
    force: Annotated[
        bool, typer.Option(help="replace an earlier neardup report (never another file)")
    ] = False,
    json_out: Annotated[
        bool, typer.Option("--json", help="print what was written as JSON")
    ] = False,
) -> None:
    """Write an HTML report of RUN, one file that opens offline.

    It shows replication, cluster sizes, collections, mirrors, thresholds and savings."""
    from neardup.report import write_report

    try:
        path = write_report(run, out, top=top, with_avoid=avoid, force=force)
    except (RunError, OutputError) as err:
        fail(str(err))
    if json_out:
        out_console.print_json(json.dumps({"path": str(path), "bytes": path.stat().st_size}))
        return
    out_console.print(f"wrote {path} ({path.stat().st_size / 1e3:,.0f} kB)", highlight=False)


def ui_command(
    run: RunArg,
    host: Annotated[str, typer.Option(help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="port to listen on")] = 8765,
    token: TokenOpt = None,
    token_file: TokenFileOpt = None,
    allow_host: AllowHostOpt = None,
    rate_limit: RateOpt = DEFAULT_RATE,
    access_log: AccessLogOpt = True,
) -> None:
    """Serve a local web app to explore RUN: search, clusters, diffs, mirrors, collections.

    Beyond loopback it needs a token; a browser asks for it (HTTP Basic: any user name, the
    token as password)."""
    require_extra("service", "ui", "fastapi", "uvicorn")
    from neardup.door import allowed_hosts, is_loopback
    from neardup.ui import create_app

    secret = resolve_token(token, token_file)
    if secret is None and not is_loopback(host):
        fail(f"--host {host} reaches other machines: give --token, --token-file or $NEARDUP_TOKEN")
    try:
        with RichProgress(enabled=show_progress(False)) as progress:  # the search index, once
            app = create_app(
                run,
                token=secret,
                hosts=allowed_hosts(host, allow_host or ()),
                rate=rate_or_none(rate_limit),
                access_log=access_log,
                progress=progress,
            )
    except RunError as err:
        fail(str(err))
    check_port(host, port)
    announce("ui", host, port)
    run_server(app, host, port, secret, access_log)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `neardup` application."""
    app.command("report")(report_command)
    app.command("ui")(ui_command)
