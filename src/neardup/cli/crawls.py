"""Command-line commands for crawls over time (registered by `main.py`).

`crawl` adds a crawl to a store, `evolution` compares every later crawl with the first and
with the one before it, `find-moved` is lost and found, `query` is on-the-fly resemblance.
The logic lives in `neardup.crawls` (`store`, `evolution`, `lost_found`); this module only
parses and prints.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import pyarrow as pa
import pyarrow.compute as pc
import typer
from rich.markup import escape

from neardup.cli.output import emit_table, fail, out_console
from neardup.cli.scan_options import (
    EngineName,
    SketchOpt,
    SparkConf,
    SparkMaster,
    SparkWork,
    Text,
    _settings,
)
from neardup.cli.url_options import CrawlerFiles, ExcludeUrl, IncludeUrl, url_patterns
from neardup.config import SettingsError
from neardup.crawls.cross_crawl import cross_crawl_clusters
from neardup.crawls.evolution import evolution
from neardup.crawls.lost_found import find_moved, find_moved_all, query
from neardup.crawls.store import StoreError, add_crawl, stored_sketch
from neardup.ingest.readers import InputError
from neardup.pipeline.executors import EngineUnavailableError
from neardup.pipeline.scan import EmptyScanError
from neardup.store import RunError
from neardup.store.outputs import OutputError

StoreOpt = Annotated[Path, typer.Option("--store", "-s", help="store folder (crawls.json)")]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the result as JSON")]
ERRORS = (
    StoreError,
    RunError,
    SettingsError,
    InputError,
    OutputError,
    EmptyScanError,
    EngineUnavailableError,  # Spark missing, or a Spark job that failed (its stage named)
    FileNotFoundError,
)


def _print_table(title: str, table: pa.Table, several: bool = False) -> None:
    """An Arrow table as rows (floats to three places on a terminal, complete on a pipe)."""
    rows = [list(row.values()) for row in table.to_pylist()]
    shown = [[f"{v:.3f}" if isinstance(v, float) else v for v in row] for row in rows]
    emit_table(title, table.column_names, rows, terminal_rows=shown, title_on_pipe=several)


def _clusters_spanning_crawls(table: pa.Table) -> int:
    """How many clusters across crawls hold pages of more than one crawl."""
    grouped = table.group_by("cross_cluster_id").aggregate([("crawl", "count_distinct")])
    return int(pc.sum(pc.greater(grouped.column("crawl_count_distinct"), 1)).as_py() or 0)


def _comparison_kinds(table: pa.Table) -> list[tuple[str, str]]:
    """(flag column, title) of the comparisons to print: cumulative (first crawl -> each later
    crawl) and consecutive (each crawl -> the next); one block when the store holds two crawls,
    where both are the same pair."""
    if pc.all(pc.and_(table["consecutive"], table["cumulative"])).as_py():
        return [("consecutive", "")]
    return [
        ("cumulative", " — cumulative: first crawl → n"),
        ("consecutive", " — consecutive: n − 1 → n"),
    ]


def _kind(table: pa.Table, flag: str) -> pa.Table:
    """The rows of one kind of comparison, without the two flag columns."""
    return table.filter(table[flag]).drop_columns(["consecutive", "cumulative"])


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `neardup` application."""

    @app.command("crawl")
    def crawl_command(
        inputs: Annotated[list[Path], typer.Argument(help="crawl files or folders")],
        label: Annotated[str, typer.Option("--label", "-l", help="name of this crawl")],
        store: StoreOpt,
        threshold: Annotated[float, typer.Option(help="resemblance of a verified pair")] = 0.8,
        num_perm: Annotated[int | None, typer.Option(help="min-hash values per page")] = None,
        sketch: SketchOpt = None,
        preset: Annotated[str | None, typer.Option(help="fetterly: the 2004 settings")] = None,
        workers: Annotated[int | None, typer.Option(min=1, help="worker processes")] = None,
        base_url: Annotated[str | None, typer.Option(help="base URL of an HTML folder")] = None,
        force: Annotated[bool, typer.Option(help="replace a crawl of the same label")] = False,
        include_crawler_files: CrawlerFiles = False,
        include_url: IncludeUrl = None,
        exclude_url: ExcludeUrl = None,
        text: Text = True,
        engine: EngineName = "embedded",
        spark_master: SparkMaster = None,
        spark_conf: SparkConf = None,
        spark_work: SparkWork = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Scan INPUTS as crawl LABEL of a store of crawls.

        The crawl goes to store/crawls/LABEL, listed in crawls.json; with --engine spark it
        keeps the Parquet datasets Spark wrote, read in place."""
        # The scan group's module, imported only for this command (see `main.py`).
        from neardup.cli.scan import engine_runner

        try:
            settings = _settings(
                preset,
                threshold=threshold,
                num_perm=num_perm,
                sketch=sketch or stored_sketch(store),
                include_crawler_files=include_crawler_files,
                **url_patterns(include_url, exclude_url),
                keep_text=text,
            )
            runner = engine_runner(engine, workers, spark_master, spark_conf, spark_work)
            result = add_crawl(
                inputs, store, label, settings, workers, base_url, force, engine=runner
            )
        except (*ERRORS, ValueError) as err:  # ValueError: an unknown --engine or input
            fail(str(err))
        s = result.summary
        if json_out:
            out_console.print_json(json.dumps({"label": label, "path": str(result.path), **s}))
            return
        out_console.print(
            f"crawl {escape(label)}: {s.get('records', '?')} records, {s.get('sketched', '?')} "
            f"compared, {s.get('clusters', '?')} clusters -> {escape(str(result.path))}"
        )

    @app.command("evolution")
    def evolution_command(
        store: Annotated[Path, typer.Argument(help="store folder")],
        json_out: JsonOpt = False,
    ) -> None:
        """How clusters, hosts and pages changed from crawl to crawl of a store.

        Cluster evolution (Φ, Ψ), host stability and page change of every later crawl
        against the first (cumulative) and the previous one (consecutive); writes
        evolution_phi_psi.parquet and evolution_changes.parquet into the store."""
        try:
            result = evolution(store)
            across = cross_crawl_clusters(store)
        except ERRORS as err:
            fail(str(err))
        spanning = _clusters_spanning_crawls(across)
        if json_out:
            payload = {
                "phi_psi": result.phi_psi_summary.to_pylist(),
                "changes": result.change_summary.to_pylist(),
                "hosts": result.hosts.to_pylist(),
                "clusters_spanning_crawls": spanning,
            }
            out_console.print_json(json.dumps(payload, default=str))
            return
        for flag, name in _comparison_kinds(result.phi_psi_summary):
            summary = _kind(result.phi_psi_summary, flag)
            _print_table(f"Φ and Ψ by cluster size in crawl m{name}", summary, several=True)
            _print_table(
                f"Hosts in the same number of clusters{name}",
                _kind(result.hosts, flag),
                several=True,
            )
            changes = _kind(result.change_summary, flag)
            _print_table(f"Page change by cluster size in crawl m{name}", changes, several=True)
        out_console.print(
            f"clusters across crawls: {spanning:,} clusters hold pages of two or more crawls "
            f"(cross_clusters.parquet)"
        )

    @app.command("find-moved")
    def find_moved_command(
        url: Annotated[str | None, typer.Argument(help="a URL known to the store")] = None,
        store: StoreOpt = Path("."),
        all_gone: Annotated[
            bool, typer.Option("--all", help="every URL of the previous crawl gone from the latest")
        ] = False,
        threshold: Annotated[float | None, typer.Option(help="least resemblance")] = None,
        json_out: JsonOpt = False,
    ) -> None:
        """Lost and found: where the content of URL lives in the latest crawl."""
        if (url is None) == (not all_gone):
            fail("give a URL or --all (not both)")
        try:
            if all_gone:
                table = find_moved_all(store, threshold)
                found = sum(v is not None for v in table["new_url"].to_pylist())
                if json_out:
                    out_console.print_json(json.dumps(table.to_pylist()))
                else:
                    _print_table(f"{found} of {table.num_rows} gone URLs found", table)
                return
            hits = find_moved(store, str(url), threshold)
        except ERRORS as err:
            fail(str(err))
        if json_out:
            out_console.print_json(json.dumps(hits))
        elif not hits:
            fail(f"no page of the latest crawl resembles {url}", code=1)
        else:
            _print_table(f"{url} now", pa.Table.from_pylist(hits))

    @app.command("query")
    def query_command(
        document: Annotated[str, typer.Argument(help="a local html/txt/pdf file, or a stored URL")],
        store: StoreOpt = Path("."),
        crawl: Annotated[str | None, typer.Option(help="crawl label (default: latest)")] = None,
        threshold: Annotated[float, typer.Option(help="least resemblance or containment")] = 0.5,
        limit: Annotated[int, typer.Option(help="most results")] = 20,
        json_out: JsonOpt = False,
    ) -> None:
        """On-the-fly resemblance: the pages DOCUMENT resembles or is contained in."""
        try:
            hits = query(store, document, crawl, threshold, limit)
        except ERRORS as err:
            fail(str(err))
        if json_out:
            out_console.print_json(json.dumps(hits))
        elif not hits:
            out_console.print("no similar page")
        else:
            _print_table(f"pages like {document}", pa.Table.from_pylist(hits))
