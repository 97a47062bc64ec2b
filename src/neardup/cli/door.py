"""The door options shared by `neardup serve` and `neardup ui`, and the one way both start
uvicorn: token from `--token`, `--token-file` or `$NEARDUP_TOKEN`, `--allow-host` names,
`--rate-limit`, the access log, and a loud warning when bound beyond loopback."""

from __future__ import annotations

import logging
import os
import socket
import sys
from typing import Annotated, Any

import typer
from rich.markup import escape

from neardup.cli.output import console, fail

# The servers' default rate limit per client: far above one person or script, far below a flood.
DEFAULT_RATE = "6000/minute"
TokenOpt = Annotated[
    str | None,
    typer.Option(help="Bearer token (default: --token-file, then $NEARDUP_TOKEN)."),
]
TokenFileOpt = Annotated[
    str | None,
    typer.Option(help="File whose first line is the token (keeps it out of `ps` and history)."),
]
AllowHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        help="Host name clients may use besides loopback (repeatable; '*': any, unsafe).",
    ),
]
RateOpt = Annotated[
    str,
    typer.Option(help="Requests per client, e.g. '6000/minute' or '100/second'; 'off': none."),
]
AccessLogOpt = Annotated[
    bool, typer.Option(help="One line per request on stderr (never the token).")
]


def resolve_token(token: str | None, token_file: str | None) -> str | None:
    """The token, or a clean failure when the token file cannot be read."""
    from neardup.door import read_token

    try:
        return read_token(token, token_file, os.environ.get("NEARDUP_TOKEN"))
    except (OSError, ValueError) as err:
        fail(f"token file: {err}")


def rate_or_none(rate: str) -> str | None:
    """The `--rate-limit` value checked (None for 'off'), or a clean failure."""
    from neardup.door import check_rate

    try:
        return check_rate(rate)
    except ValueError as err:
        fail(f"--rate-limit {rate!r}: {err}")


def check_port(host: str, port: int) -> None:
    """Stop with one line when the address is taken, before anything announces it: a server
    that says where it listens and then dies on the bind misleads whoever reads the first
    line."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as err:
        fail(f"--host {host}: {err.strerror or err}")
    family, _, _, _, address = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as err:
            fail(f"cannot listen on {host}:{port}: {err.strerror or err}; choose another --port")


def server_url(host: str, port: int) -> str:
    """The address a browser or a client uses for a server bound to `host`: an IPv6
    address in brackets, and loopback for a server bound to every interface (the one
    address of it this machine always reaches)."""
    name = host.strip("[]")
    if name in ("0.0.0.0", ""):
        name = "127.0.0.1"
    elif name == "::":
        name = "::1"
    return f"http://[{name}]:{port}/" if ":" in name else f"http://{name}:{port}/"


def announce(command: str, host: str, port: int, *notes: str) -> None:
    """The lines a server prints on stderr before serving, the same for `serve` and `ui`:
    where it answers, where its API is described, then `notes` (what it refuses)."""
    url = server_url(host, port)
    console.print(f"neardup {command} on {url} (Ctrl-C to stop)", highlight=False, soft_wrap=True)
    console.print(f"API docs: {url}api/docs", highlight=False, soft_wrap=True)
    for line in notes:
        console.print(escape(line), highlight=False, soft_wrap=True)


def run_server(app: Any, host: str, port: int, token: str | None, access_log: bool) -> None:
    """Warn when reachable beyond loopback, set up the access log, then serve."""
    import uvicorn

    from neardup.door import UVICORN_OPTIONS, bind_warning

    warning = bind_warning(host, token)
    if warning:
        console.print(f"[bold red]{escape(warning)}[/]", highlight=False)
    log = logging.getLogger("neardup.access")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    if access_log:
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    try:
        uvicorn.run(app, host=host, port=port, log_level="warning", **UVICORN_OPTIONS)
    finally:
        log.removeHandler(handler)
