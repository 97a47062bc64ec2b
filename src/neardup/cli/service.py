"""Command-line commands for the service work (registered by `main.py`)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from neardup.cli.door import (
    DEFAULT_RATE,
    AccessLogOpt,
    AllowHostOpt,
    RateOpt,
    TokenFileOpt,
    TokenOpt,
)
from neardup.cli.engine_options import EngineName, SparkConf, SparkMaster, spark_conf_pairs
from neardup.cli.url_options import ExcludeUrl, IncludeUrl, url_patterns


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `neardup` application."""

    @app.command("serve")
    def serve(
        store: Annotated[Path, typer.Argument(help="Service store directory.")],
        host: Annotated[str, typer.Option(help="Interface to listen on.")] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="TCP port.")] = 8787,
        token: TokenOpt = None,
        token_file: TokenFileOpt = None,
        allow_host: AllowHostOpt = None,
        rate_limit: RateOpt = DEFAULT_RATE,
        max_body: Annotated[int, typer.Option(help="Largest request body, bytes.")] = 10 << 20,
        access_log: AccessLogOpt = True,
    ) -> None:
        """Serve the incremental duplicate index over HTTP.

        OpenAPI at /api/openapi.json, docs at /api/docs. Writes need the token; without
        one the server is read-only."""
        from neardup.cli.output import require_extra

        require_extra("service", "serve", "fastapi", "uvicorn")
        from neardup.cli.door import (
            announce,
            check_port,
            rate_or_none,
            resolve_token,
            run_server,
        )
        from neardup.cli.output import fail
        from neardup.door import allowed_hosts
        from neardup.index.files.store import has_index
        from neardup.index.service_index import ServiceIndex
        from neardup.index.state.updates import ServiceError
        from neardup.service.api import create_service_app
        from neardup.store.outputs import OutputError

        secret = resolve_token(token, token_file)
        try:
            # Without a token nothing is written: an existing index is opened read-only, so
            # a `neardup add` (or another server with a token) may write it meanwhile.
            index = ServiceIndex(store, read_only=secret is None and has_index(store))
        except (ServiceError, OutputError) as err:
            fail(str(err))
        app_ = create_service_app(
            index,
            secret,
            max_body,
            hosts=allowed_hosts(host, allow_host or ()),
            rate=rate_or_none(rate_limit),
            access_log=access_log,
        )
        check_port(host, port)
        announce("serve", host, port, _writes(secret))
        run_server(app_, host, port, secret, access_log)

    @app.command("add")
    def add(
        store: Annotated[Path, typer.Argument(help="Service store directory.")],
        inputs: Annotated[
            list[str] | None,
            typer.Argument(help="Crawl files (WARC, ARC, ...); none with --remove alone."),
        ] = None,
        batch: Annotated[
            int,
            typer.Option(
                help="Pages per transaction (the batches read while an existing index "
                "opens go in as one)."
            ),
        ] = 1000,
        links: Annotated[
            bool, typer.Option(help="Count in-links from the files' link graph for winners.")
        ] = True,
        workers: Annotated[
            int | None,
            typer.Option(min=1, help="Processes sketching the next batches (default: cores)."),
        ] = None,
        include_url: IncludeUrl = None,
        exclude_url: ExcludeUrl = None,
        include_crawler_files: Annotated[
            bool | None,
            typer.Option(
                "--include-crawler-files/--no-include-crawler-files",
                help="a new store compares a crawler's own files (robots.txt, sitemaps, ...) "
                "or not (the default, as scan); an existing store keeps its own and refuses "
                "the other",
                show_default=False,
            ),
        ] = None,
        json_out: Annotated[bool, typer.Option("--json", help="print the totals as JSON")] = False,
        wait: Annotated[
            bool,
            typer.Option(help="When another process writes the store, wait for it to finish."),
        ] = False,
        remove: Annotated[
            Path | None,
            typer.Option(
                "--remove",
                help="A file of URLs of pages that are gone, one a line ('-': standard "
                "input): they leave the index before the crawl files' pages go in.",
                show_default=False,
            ),
        ] = None,
        engine: EngineName = "embedded",
        spark_master: SparkMaster = None,
        spark_conf: SparkConf = None,
    ) -> None:
        """Add or update pages from crawl files (redirects included), batch by batch.

        A page is added when a scan of the same files would compare it (the scan's rule:
        2xx responses with text, no crawler files such as robots.txt, the URL patterns);
        the others are counted by reason. A new store keeps the URL patterns it is given;
        an existing one keeps its own and refuses others.

        With --remove FILE, the pages of the URLs it lists (one a line; blank lines and
        lines starting with # are skipped) leave the index first; the report counts those
        removed and those the index did not hold.

        With --links (default), each added URL's `links_in` becomes the number of distinct
        pages of these files linking to it, sent as one last batch once every file is read
        (a link can come after the page it points to); redirects pass theirs on to their
        target when winners are chosen.

        With --engine spark, the files are read, their pages turned into text and sketched
        on Spark's executors (a task a file); the batches are applied to the index here.
        """
        from neardup.cli.output import emit_table, fail, out_console
        from neardup.config import SettingsError
        from neardup.index.feed import add_files
        from neardup.index.state.updates import ServiceError
        from neardup.ingest.paths_file import PathsFileError
        from neardup.ingest.readers import InputError
        from neardup.pipeline.executors import EngineUnavailableError
        from neardup.store.outputs import OutputError

        started = time.perf_counter()
        if not inputs and remove is None:
            fail("give crawl files to add, or --remove FILE of URLs that are gone")
        if engine == "embedded":
            # This process runs its kernels on one thread (its workers are processes, the
            # thread that opens the index calls none of size): every call goes to the
            # module compiled ahead. Left to the side-by-side rule, the first batch's text
            # (2.4 MB at 1,000 web pages) started numba's JIT, 0.5-0.8 s of a 1 % increment.
            from neardup.kernels import jit

            jit.one_thread()
        try:
            gone = url_lines(remove) if remove is not None else []
            patterns = url_patterns(include_url, exclude_url)
            patterns["include_crawler_files"] = include_crawler_files
            totals = add_files(
                store,
                inputs or [],
                batch,
                links,
                workers,
                **patterns,
                wait=wait,
                remove=gone,
                engine=engine,
                spark_master=spark_master,
                spark_conf=spark_conf_pairs(spark_conf),
            )
        except (
            OutputError,
            InputError,
            PathsFileError,
            SettingsError,
            ServiceError,
            EngineUnavailableError,
            FileNotFoundError,
        ) as err:
            fail(str(err))
        report = add_report(totals, time.perf_counter() - started)
        if json_out:
            out_console.print_json(json.dumps(report))
            return
        rows: list[list[object]] = []
        shown: list[list[str]] = []
        for key, label, _ in ADD_REPORT:
            if key == "skipped_by_reason":
                for reason, n in report[key].items():
                    rows.append([f"{key}.{reason}", n])
                    shown.append([f"  skipped: {reason}", f"{n:,}"])
            else:
                value = report[key]
                rows.append([key, value])
                shown.append([label, f"{value:.1f}s" if key == "seconds" else f"{value:,}"])
        emit_table(f"neardup add → {store}", ["what", "value"], rows, frozenset({"value"}), shown)


def url_lines(path: Path) -> list[str]:
    """The URLs of a file, one a line, read as a paths file is (gzip'd or remote too; blank
    lines and # comments left out), or of standard input for `-`."""
    from neardup.ingest.paths_file import listed_entries, listed_paths

    if str(path) == "-":
        return listed_entries(sys.stdin.read())
    return listed_paths(str(path), "the URLs to remove")


def _writes(token: str | None) -> str:
    """What `serve` says of writes: refused without a token, else how to send it."""
    if token is None:
        return (
            "read-only: no token, so POST and DELETE /pages are refused "
            "(give --token, --token-file or $NEARDUP_TOKEN to accept writes)"
        )
    return "writes (POST and DELETE /pages) need the header Authorization: Bearer <token>"


# `add`'s report, in its order: (key in --json and on a pipe, label on a terminal, the
# figure of `add_files`' totals it shows). The totals carry the index's own counter names
# (tier1, tier2, recomputed, ...) and some that no longer count anything (tier2_all_pairs,
# repaired); these are the figures a user can act on, named for what they count.
ADD_REPORT: tuple[tuple[str, str, str], ...] = (
    ("new_pages", "new pages", "new"),
    ("resent_pages", "pages already in the index, sent again", "changed"),
    ("unchanged_pages", "  of which unchanged (same sketch: nothing to redo)", "tier1"),
    ("compared_pages", "pages compared with the index", "tier2"),
    ("pair_comparisons", "page pairs compared", "comparisons"),
    ("groups_updated", "groups updated", "groups_touched"),
    ("components_reclustered", "components of the pair graph clustered again", "recomputed"),
    ("removed_pages", "pages removed (--remove)", "removed"),
    ("remove_missing", "  URLs to remove that the index did not hold", "remove_missing"),
    ("skipped", "records skipped (not pages a scan compares)", "skipped"),
    ("skipped_by_reason", "", "skipped: "),  # one row per reason, commonest first
    ("index_pages", "pages in the index", "pages"),
    ("index_redirects", "redirects in the index", "redirects"),
    ("index_groups", "groups in the index", "groups"),
    ("index_duplicate_groups", "groups of two or more pages", "duplicate_groups"),
    ("seconds", "time", ""),
)


def add_report(totals: dict[str, float], seconds: float) -> dict[str, Any]:
    """`add_files`' totals as `add` reports them (`ADD_REPORT`): integers, the skips by
    reason as one mapping, and `seconds` the whole command's time."""
    report: dict[str, Any] = {}
    for key, _, source in ADD_REPORT:
        if key == "skipped_by_reason":
            skips = {k[len(source) :]: int(v) for k, v in totals.items() if k.startswith(source)}
            report[key] = dict(sorted(skips.items(), key=lambda kv: (-kv[1], kv[0])))
        elif key == "seconds":
            report[key] = round(seconds, 3)
        else:
            report[key] = int(totals.get(source, 0))
    return report
