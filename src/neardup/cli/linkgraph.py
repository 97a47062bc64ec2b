"""Command-line commands for mirrors and replicated collections (registered by `main.py`).

`collections`, `mirrors`, `avoid-list` and `rollup` read a finished run, print a table (or
JSON with --json) and write their Parquet outputs into the run directory (or --out). The
logic lives in `neardup.linkgraph` (`collections`, `mirrors`, `avoid` and `rollup`); this
module only parses and prints. `collections` and `mirrors` take
`--engine spark` to run their SQL on Spark (docs/spark_relational.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from neardup.cli.output import emit_table, fail, note, out_console, to_terminal
from neardup.store import RunError

RunArg = Annotated[Path, typer.Argument(help="run directory (from `neardup scan`)")]
OutOpt = Annotated[
    Path | None, typer.Option("--out", "-o", help="where to write the Parquet files (default: RUN)")
]
JsonOpt = Annotated[bool, typer.Option("--json", help="print the result as JSON")]
MinSize = Annotated[
    int, typer.Option(help="collections (copies) of fewer pages are noise (Cho et al.: 10)")
]
Similar = Annotated[
    bool,
    typer.Option(
        "--similar-only/--extended",
        help="merge only when |Ri| = s = d = |Rj| (no partial mirrors); default: extended",
    ),
]
SingleSite = Annotated[bool, typer.Option("--single-site", help="collections never span two hosts")]
MinPages = Annotated[
    int, typer.Option(help="pages each host needs in shared clusters (Fetterly et al.: 10)")
]
Engine = Annotated[
    str,
    typer.Option(
        help="where the SQL runs: embedded (DuckDB on the run's database) or spark (Spark SQL "
        "on the run's Parquet files; docs/spark_relational.md)"
    ),
]
SparkMaster = Annotated[
    str | None,
    typer.Option(help="Spark master for --engine spark (default local[*]; spark-submit's wins)"),
]


def _connect(run: Path, engine: str = "embedded", spark_master: str | None = None) -> Any:
    from neardup.linkgraph.relational import connect
    from neardup.pipeline.executors import ENGINES, EngineUnavailableError

    if engine not in ENGINES:
        fail(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    try:
        return connect(run, engine, spark_master)
    except (RunError, EngineUnavailableError) as err:
        fail(str(err))


def _collection_options(min_size: int, similar_only: bool, single_site: bool) -> Any:
    from neardup.linkgraph.collections import CollectionOptions

    try:
        return CollectionOptions(
            extended=not similar_only, single_site=single_site, min_size=min_size
        )
    except ValueError as err:
        fail(str(err))


def _mirror_options(min_pages: int) -> Any:
    from neardup.linkgraph.mirrors import MirrorOptions

    try:
        return MirrorOptions(min_pages=min_pages)
    except ValueError as err:
        fail(str(err))


def _print_json(data: Any) -> None:
    out_console.print_json(json.dumps(data, default=str))


def collections_command(
    run: RunArg,
    min_size: MinSize = 10,
    similar_only: Similar = False,
    single_site: SingleSite = False,
    top: Annotated[int, typer.Option(help="how many clusters to list")] = 20,
    out: OutOpt = None,
    as_json: JsonOpt = False,
    engine: Engine = "embedded",
    spark_master: SparkMaster = None,
) -> None:
    """Replicated collections: similar clusters of hyperlinked pages copied across sites."""
    from neardup.linkgraph.collections import find_collections

    options = _collection_options(min_size, similar_only, single_site)
    con = _connect(run, engine, spark_master)
    try:
        result = find_collections(con, options)
    finally:
        con.close()
    written = result.write(out or run)
    clusters = result.clusters.to_pylist()
    if as_json:
        _print_json({"clusters": clusters, "copies": result.copies.to_pylist()})
        return
    shown = clusters[:top]
    emit_table(
        f"replicated collections in {run}",
        ["#", "description", "principal url", "cardinality", "size", "pages"],
        [
            [i, c["description"], c["principal_url"], c["cardinality"], c["size"], c["pages"]]
            for i, c in enumerate(shown, 1)
        ],
        frozenset({"#", "cardinality", "size", "pages"}),
        [
            [
                i,
                c["description"] or "",
                c["principal_url"],
                c["cardinality"],
                f"{c['size']:,}",
                f"{c['pages']:,}",
            ]
            for i, c in enumerate(shown, 1)
        ],
    )
    pages = sum(c["pages"] for c in clusters)
    note(
        f"{len(clusters):,} collection clusters, {pages:,} pages; "
        f"{result.trivial_clusters:,} trivial clusters, {result.merge_edges:,} merges "
        f"({result.similar_edges:,} similar); {result.seconds:.1f}s; wrote "
        + ", ".join(p.name for p in written)
    )


def mirrors_command(
    run: RunArg,
    min_pages: MinPages = 10,
    out: OutOpt = None,
    as_json: JsonOpt = False,
    engine: Engine = "embedded",
    spark_master: SparkMaster = None,
) -> None:
    """Mirrored hosts: host pairs with shared content, confirmed by their URL suffixes."""
    from neardup.linkgraph.mirrors import find_mirrors

    options = _mirror_options(min_pages)
    con = _connect(run, engine, spark_master)
    try:
        result = find_mirrors(con, options)
    finally:
        con.close()
    written = result.write(out or run)
    pairs = result.pairs.to_pylist()
    by_content = result.confirmed().num_rows
    by_suffix = sum(result.suffix_pairs.column("confirmed").to_pylist())
    if as_json:
        _print_json(
            {
                "pairs": pairs,
                "suffix_method": result.suffix_pairs.to_pylist(),
                "confirmed_by_content_method": by_content,
                "confirmed_by_suffix_method": by_suffix,
                "auto_mirrors": result.auto_mirrors,
            }
        )
        return
    emit_table(
        f"mirrored hosts in {run}",
        ["host a (original)", "host b (copy)", "shared", "suffix matches", "kind", "verdict"],
        [
            [
                p["host_a"],
                p["host_b"],
                p["shared_pages"],
                p["suffix_matches"],
                p["kind"] + (f" ({p['alias_reason']})" if p["alias_reason"] else ""),
                p["verdict"],
            ]
            for p in pairs
        ],
        frozenset({"shared", "suffix matches"}),
    )
    aliases = sum(p["kind"] == "alias" for p in pairs)
    note(
        f"content method (Fetterly et al.): {len(pairs)} candidate pairs, {by_content} confirmed "
        f"mirror pairs, {aliases} aliases, {result.auto_mirrors} auto-mirrors set aside; "
        f"URL-suffix method (Bharat & Broder): {result.suffix_pairs.num_rows} candidates, "
        f"{by_suffix} confirmed; {result.seconds:.1f}s; wrote " + ", ".join(p.name for p in written)
    )


def avoid_list_command(
    run: RunArg,
    min_size: MinSize = 10,
    min_pages: MinPages = 10,
    out: OutOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """What a crawler should skip: aliases, mirror hosts, replicas of collections."""
    from neardup.linkgraph.avoid import build_avoid_list
    from neardup.linkgraph.collections import find_collections
    from neardup.linkgraph.mirrors import find_mirrors

    copts = _collection_options(min_size, False, False)
    mopts = _mirror_options(min_pages)
    con = _connect(run)
    try:
        result = build_avoid_list(con, find_collections(con, copts), find_mirrors(con, mopts))
    finally:
        con.close()
    written = result.write(out or run)
    entries = result.entries.to_pylist()
    totals = {
        "pages": result.pages,
        "bytes": result.bytes,
        "crawl_pages": result.crawl_pages,
        "crawl_bytes": result.crawl_bytes,
    }
    if as_json:
        _print_json({"entries": entries, **totals})
        return
    emit_table(
        f"crawler avoid-list for {run}",
        ["skip (prefix)", "reason", "crawl instead", "pages", "bytes"],
        [[e["prefix"], e["reason"], e["kept"], e["pages"], e["bytes"]] for e in entries],
        frozenset({"pages", "bytes"}),
        [
            [e["prefix"], e["reason"], e["kept"], f"{e['pages']:,}", f"{e['bytes']:,}"]
            for e in entries
        ],
    )
    share = result.pages / result.crawl_pages if result.crawl_pages else 0.0
    bshare = result.bytes / result.crawl_bytes if result.crawl_bytes else 0.0
    note(
        f"saves {result.pages:,} of {result.crawl_pages:,} fetches ({share:.1%}) and "
        f"{result.bytes / 1e6:,.1f} of {result.crawl_bytes / 1e6:,.1f} MB ({bshare:.1%}); wrote "
        + ", ".join(p.name for p in written)
    )


def rollup_command(
    run: RunArg,
    urls_file: Annotated[
        str, typer.Argument(help="ranked URLs, one a line, best first ('-' for stdin)")
    ],
    as_json: JsonOpt = False,
) -> None:
    """Roll a ranked list of URLs up by collection and replica."""
    from neardup.linkgraph.rollup import rollup_run

    if urls_file == "-":
        urls = sys.stdin.read().splitlines()
    else:
        path = Path(urls_file)
        if not path.is_file():
            fail(f"{urls_file}: no such file")
        urls = path.read_text(encoding="utf-8").splitlines()
    try:
        entries = rollup_run(run, urls)
    except RunError as err:
        fail(str(err))
    if as_json:
        _print_json([e.to_dict() for e in entries])
        return
    if not to_terminal():  # one row per URL, whole, with what it is to its entry
        rows: list[list[object]] = []
        for e in entries:
            role = "result" if e.known else "result (not in the crawl)"
            rows.append([e.rank, e.url, role, e.group, e.title])
            for kind, urls in (
                ("more from this collection", e.more_pages),
                ("replica", e.replicas),
                ("other copy", e.other_copies),
            ):
                rows += [[e.rank, url, kind, e.group, None] for url in urls]
        emit_table("rolled-up results", ["rank", "url", "role", "group", "title"], rows)
        return
    if not entries:  # as emit_table says it for the other commands
        out_console.print("rolled-up results: none found", highlight=False)
    for e in entries:
        title = f" [dim]{escape(e.title)}[/]" if e.title else ""
        tag = "" if e.known else " [yellow](not in the crawl)[/]"
        out_console.print(f"{e.rank:>3}. {escape(e.url)}{title}{tag}")
        for url in e.more_pages:
            out_console.print(f"       more from this collection: {escape(url)}")
        for url in e.replicas:
            out_console.print(f"       replica: {escape(url)}")
        if e.other_copies:
            out_console.print(f"       [dim]also at {len(e.other_copies)} other copies[/]")


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `neardup` application."""
    app.command("collections")(collections_command)
    app.command("mirrors")(mirrors_command)
    app.command("avoid-list")(avoid_list_command)
    app.command("rollup")(rollup_command)
