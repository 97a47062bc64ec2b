"""Command-line commands for scans: `scan`, `summary`, `clusters` and `dedup` (registered
by `main.py`).

Every command has a Python API counterpart (`neardup.scan`, `neardup.write_deduplicated`,
`neardup.open_run`), and this module holds no logic of its own beyond presentation.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from neardup.cli.dedup_report import report_dedup
from neardup.cli.engine_options import spark_conf_pairs
from neardup.cli.output import console, fail, note, out_console
from neardup.cli.progress import RichProgress, show_progress
from neardup.cli.run_views import clusters_command, summary_command
from neardup.cli.scan_options import (
    SCAN_ERRORS,
    Bands,
    BaseUrl,
    Chunking,
    ChunkJoin,
    ChunkThreshold,
    Containment,
    DedupText,
    EngineName,
    ErrorPages,
    Hamming,
    Inputs,
    Links,
    MaxDf,
    Method,
    NumPerm,
    PathsBase,
    Preset,
    Rows,
    Rule,
    Sample,
    Shard,
    ShingleSize,
    SketchOpt,
    SparkConf,
    SparkMaster,
    SparkWork,
    Text,
    Threshold,
    Verbose,
    Verify,
    Workers,
    Wrap,
    _settings,
    refuse_remote_dedup,
    resolve_inputs_or_fail,
)
from neardup.cli.summary import print_summary, unusable_inputs, why_nothing
from neardup.cli.url_options import CrawlerFiles, ExcludeUrl, IncludeUrl, url_patterns
from neardup.config import Settings, SettingsError
from neardup.ingest.commoncrawl import WAT_REASON
from neardup.pipeline.dedup import scan_and_deduplicate, write_deduplicated
from neardup.pipeline.scan import EmptyScanError, input_problems, scan
from neardup.store import load_settings, load_summary


def engine_runner(
    engine: str,
    workers: int | None,
    spark_master: str | None = None,
    spark_conf: list[str] | None = None,
    spark_work: str | None = None,
) -> Any:
    """The engine object for `--engine` and the Spark options, as `scan`, `scan --crawl`
    and `crawl` build it (Spark is imported only when asked for). Raises ValueError for an
    unknown engine name."""
    from neardup.pipeline.executors import engine_named

    return engine_named(engine, workers, spark_master, spark_conf_pairs(spark_conf), spark_work)


def _note_outputs_passed_over(inputs: list[str]) -> None:
    """Say which neardup outputs inside an input folder the scan did not read (a run kept
    beside the crawl: its Parquet tables are no crawl)."""
    from neardup.ingest.readers import neardup_outputs

    for folder, kind in neardup_outputs(inputs):
        note(f"not read: {folder} (a neardup {kind}, neardup's own output)")


def _warn_damaged(lines: list[str]) -> None:
    """At the end of a scan, on stderr: each input that is damaged or cut short, with where
    and why (`truncated (51278 of 57616 bytes)`; `input_problems`), which the summary only
    counts as `unreadable record`. A warning: the exit status stays that of the scan."""
    for line in lines:
        console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)


def _announce(
    inputs: list[str], settings: Settings, workers: int | None, ranges: bool = True
) -> None:
    """`-v`: the files the scan will read (globs, folders and paths files expanded, with
    their kinds) and the settings that differ from the defaults, on stderr before any work,
    so a `--sample`/`--shard` selection can be checked before it runs for hours."""
    from neardup.ingest.input_ranges import plan_ranges, target_for
    from neardup.ingest.readers import InputError, expand_inputs
    from neardup.pipeline.executors.local import default_workers

    try:
        files = expand_inputs(inputs)
    except InputError as err:
        fail(str(err))
    target = target_for(files, workers or default_workers()) if ranges else 0
    for path, kind in files:
        how = ""
        if ranges:  # the embedded engine's tasks (`ingest/input_ranges.py`), cut as the scan cuts
            cut = plan_ranges([(path, kind)], target)
            how = f", {len(cut)} ranges" if len(cut) > 1 else ""
            how += f"; {cut[0].whole}" if cut[0].whole else ""
        console.print(f"input: {escape(path)} ({kind}{how})", highlight=False, soft_wrap=True)
    defaults = Settings().to_dict()
    changed = {k: v for k, v in settings.to_dict().items() if defaults.get(k) != v}
    shown = " ".join(f"{k}={v}" for k, v in changed.items()) or "the defaults"
    console.print(
        f"{len(files)} input file(s); settings: {escape(shown)}", highlight=False, soft_wrap=True
    )


def _run_scan(
    inputs: list[str],
    out: Path,
    settings: Settings,
    workers: int | None,
    base_url: str | None,
    force: bool,
    quiet: bool,
    engine: str = "embedded",
    spark_master: str | None = None,
    spark_conf: list[str] | None = None,
    spark_work: str | None = None,
) -> dict[str, Any]:
    try:
        runner = engine_runner(engine, workers, spark_master, spark_conf, spark_work)
        with RichProgress(enabled=show_progress(quiet)) as progress:
            result = scan(
                inputs,
                out,
                settings=settings,
                workers=workers,
                base_url=base_url,
                force=force,
                progress=progress,
                engine=runner,
            )
    except EmptyScanError as err:
        fail(str(err), code=1)
    except SCAN_ERRORS as err:
        fail(str(err))
    return result.summary


def _store_sketch(store: Path) -> str | None:
    """The sketch of the crawls in `store` (None: a new store), for `scan --crawl`."""
    from neardup.crawls.store import stored_sketch

    return stored_sketch(store)


def _add_crawl(
    inputs: list[str],
    store: Path,
    label: str,
    settings: Settings,
    workers: int | None,
    base_url: str | None,
    force: bool,
    engine: str = "embedded",
    spark_master: str | None = None,
    spark_conf: list[str] | None = None,
    spark_work: str | None = None,
) -> dict[str, Any]:
    """`scan --crawl`: the scan goes into a store of crawls, as `neardup crawl` does, on
    either engine (a Spark crawl's tables stay the datasets its executors wrote)."""
    from neardup.crawls.store import StoreError, add_crawl

    try:
        runner = engine_runner(engine, workers, spark_master, spark_conf, spark_work)
        result = add_crawl(inputs, store, label, settings, workers, base_url, force, engine=runner)
    except (StoreError, *SCAN_ERRORS) as err:
        fail(str(err))
    return result.summary


def scan_command(
    inputs: Inputs,
    out: Annotated[Path, typer.Option("--out", "-o", help="run directory to write")],
    threshold: Threshold = 0.8,
    method: Method = "minhash",
    preset: Preset = None,
    num_perm: NumPerm = None,
    sketch: SketchOpt = None,
    shingle_size: ShingleSize = None,
    wrap: Wrap = None,
    bands: Bands = None,
    rows: Rows = None,
    verify: Verify = "sketch",
    cluster_rule: Rule = "core",
    max_shingle_df: MaxDf = 0,
    include_error_pages: ErrorPages = False,
    include_crawler_files: CrawlerFiles = False,
    include_url: IncludeUrl = None,
    exclude_url: ExcludeUrl = None,
    links: Links = True,
    text: Text = True,
    containment: Containment = None,
    chunking: Chunking = None,
    chunk_threshold: ChunkThreshold = None,
    chunk_join: ChunkJoin = None,
    hamming: Hamming = None,
    workers: Workers = None,
    base_url: BaseUrl = None,
    paths_base: PathsBase = None,
    sample: Sample = None,
    shard: Shard = None,
    engine: EngineName = "embedded",
    spark_master: SparkMaster = None,
    spark_conf: SparkConf = None,
    spark_work: SparkWork = None,
    force: Annotated[bool, typer.Option(help="replace an existing run directory")] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    verbose: Verbose = False,
    json_summary: Annotated[bool, typer.Option("--json", help="print the summary as JSON")] = False,
    crawl: Annotated[
        str | None,
        typer.Option(help="add the scan as crawl LABEL of the store OUT (see `neardup crawl`)"),
    ] = None,
) -> None:
    """Scan a crawl: sketch every page and cluster the near-duplicates into OUT.

    Which settings for what (docs/methods.md defines and measures each method):

    \b
    - near-duplicate web pages, navigation and boilerplate included: the
      defaults (--method minhash --threshold 0.8 --cluster-rule core); keep
      --max-shingle-df 0, since dropping common shingles lowers the
      resemblance of short pages below the threshold
    - removing copies from a dataset: the same scan, then `neardup dedup
      --run OUT`; a higher --threshold removes only closer copies
    - virtually identical pages only: --method supershingles (about 0.95
      and up) or --method simhash (8 bytes a page, for very large crawls)
    - copies with the same words: --method exact
    - excerpts, pages contained in others: --method broder-min
      --containment 0.8
    - pages that share many lines, whatever their sizes: --method chunks
    - mirrored hosts: the defaults, then `neardup mirrors OUT`

    --cluster-rule core, the default, keeps the recall of connected components
    without their blobs. On the documentation benchmark (docs/benchmarks.md) it
    kept together 0.987 of the pairs with Jaccard 0.9 and up, with no wrong
    merge; transitive kept them all but put 5 percent of its same-cluster pairs
    below 0.5 (chains of navigation-heavy pages), and center kept 0.975.
    """
    try:
        settings = _settings(
            preset,
            threshold=threshold,
            method=method,
            num_perm=num_perm,
            sketch=sketch if sketch or crawl is None else _store_sketch(out),
            shingle_size=shingle_size,
            wrap_shingles=wrap,
            bands=bands,
            rows=rows,
            verify=verify,
            cluster_rule=cluster_rule,
            max_shingle_df=max_shingle_df,
            include_error_pages=include_error_pages,
            include_crawler_files=include_crawler_files,
            **url_patterns(include_url, exclude_url),
            extract_links=links,
            keep_text=text,
            containment=containment,
            chunking=chunking,
            chunk_threshold=chunk_threshold,
            chunk_join=chunk_join,
            simhash_distance=hamming,
        )
    except SettingsError as err:
        fail(str(err))
    inputs = resolve_inputs_or_fail(inputs, paths_base, sample, shard)
    if verbose:
        _announce(inputs, settings, workers, ranges=engine == "embedded")
    if crawl is None:
        summary = _run_scan(
            inputs,
            out,
            settings,
            workers,
            base_url,
            force,
            quiet,
            engine,
            spark_master,
            spark_conf,
            spark_work,
        )
    else:
        summary = _add_crawl(
            inputs,
            out,
            crawl,
            settings,
            workers,
            base_url,
            force,
            engine,
            spark_master,
            spark_conf,
            spark_work,
        )
    run_dir = out if crawl is None else out / "crawls" / crawl  # where `pages` is
    # inputs that gave no page: beside others, WAT files do not count (they hold links)
    problems = input_problems(
        run_dir, WAT_REASON if summary["sketched"] else None, skipped=summary["skipped"]
    )
    if json_summary:
        out_console.print_json(json.dumps(summary, default=str))
    elif summary["sketched"]:
        print_summary(summary, out)
        unusable = unusable_inputs(problems.pageless)  # a bad file among good ones, by name
        if unusable:
            note(unusable)
    _warn_damaged(problems.damaged)
    _note_outputs_passed_over(inputs)
    if summary["sketched"] == 0:
        why = why_nothing(problems.pageless)
        fail(f"no usable page could be read from the input: {why}", code=1)


def dedup_command(
    inputs: Annotated[
        list[Path] | None, typer.Argument(help="inputs to scan (omit with --run)")
    ] = None,
    out: Annotated[
        Path, typer.Option("--out", "-o", help="directory for the deduplicated output")
    ] = Path("clean"),
    run: Annotated[
        Path | None, typer.Option(help="reuse this finished scan instead of scanning")
    ] = None,
    threshold: Threshold = 0.8,
    method: Method = "minhash",
    preset: Preset = None,
    workers: Workers = None,
    base_url: BaseUrl = None,
    include_crawler_files: CrawlerFiles = False,
    include_url: IncludeUrl = None,
    exclude_url: ExcludeUrl = None,
    text: DedupText = None,
    force: Annotated[
        bool, typer.Option(help="replace an earlier dedup output in OUT (never other files)")
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="no progress bars")] = False,
    verbose: Verbose = False,
    json_out: Annotated[bool, typer.Option("--json", help="print the outcome as JSON")] = False,
) -> None:
    """Write INPUTS without their non-representative near-duplicates, plus keep/remove lists."""
    try:
        if run is None:
            if not inputs:
                fail("give inputs to scan, or --run with a finished scan")
            refuse_remote_dedup([str(p) for p in inputs])
            # deduplication needs no link graph and no stored text: skip both
            settings = _settings(
                preset,
                threshold=threshold,
                method=method,
                extract_links=False,
                keep_text=bool(text),
                include_crawler_files=include_crawler_files,
                **url_patterns(include_url, exclude_url),
            )
            if verbose:
                _announce([str(p) for p in inputs], settings, workers)
            with RichProgress(enabled=show_progress(quiet)) as progress:
                _, result = scan_and_deduplicate(
                    [str(p) for p in inputs],
                    out,
                    settings,
                    force,
                    workers=workers,
                    base_url=base_url,
                    progress=progress,
                )
        else:
            if include_url or exclude_url or include_crawler_files or text is not None:
                fail(
                    "--include-url, --exclude-url, --include-crawler-files and --text/--no-text "
                    f"are a scan's settings: {run} was scanned with its own (give inputs instead)"
                )
            load_settings(run)
            if inputs:
                recorded = {str(Path(p)) for p in load_summary(run).get("inputs", [])}
                if {str(p) for p in inputs} != recorded:
                    fail(f"{run} was made from other inputs: {', '.join(sorted(recorded))}")
            result = write_deduplicated(run, out, force)
    except EmptyScanError as err:
        fail(str(err), code=1)
    except SCAN_ERRORS as err:
        fail(str(err))
    report_dedup(result, out, json_out)


def register(app: typer.Typer) -> None:
    """Add this module's commands to the `neardup` application."""
    app.command("scan")(scan_command)
    app.command("summary")(summary_command)
    app.command("clusters")(clusters_command)
    app.command("dedup")(dedup_command)
