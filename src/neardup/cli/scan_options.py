"""Options shared by `scan` and `dedup`, and the settings they make.

Both commands scan (dedup when no finished run is given), so they take the same option
types, refuse the same errors and turn options into `Settings` the same way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Annotated, Any

import typer

# The engine's options, here too for the scan commands that take all their options here.
from neardup.cli.engine_options import EngineName as EngineName
from neardup.cli.engine_options import SparkConf as SparkConf
from neardup.cli.engine_options import SparkMaster as SparkMaster
from neardup.cli.engine_options import SparkWork as SparkWork
from neardup.config import Settings, SettingsError
from neardup.ingest.readers import InputError
from neardup.pipeline.executors import EngineUnavailableError
from neardup.pipeline.scan import EmptyScanError
from neardup.store import RunError
from neardup.store.outputs import OutputError

# What a scan can refuse before or during its work: each becomes one line and exit 2.
SCAN_ERRORS = (
    InputError,
    OutputError,
    SettingsError,
    RunError,
    EngineUnavailableError,
    EmptyScanError,
    FileNotFoundError,
    ValueError,
)

# Options shared by `scan` and `dedup` (which scans first when no run is given).
Inputs = Annotated[
    list[str],
    typer.Argument(
        help="WARC/ARC files, HTML folders, JSONL or Parquet tables; URLs (https://, s3://, "
        "gs://, globs on s3/gs), - for stdin, or a paths file (warc.paths.gz) of a published "
        "crawl (with --engine spark, URIs Spark reads: hdfs://, s3a://, file://)"
    ),
]
PathsBase = Annotated[
    str | None,
    typer.Option(help="base URL for the relative paths of a paths file (Common Crawl's default)"),
]
Sample = Annotated[
    int | None,
    typer.Option(min=1, help="read N files of the paths file (the same N on every run)"),
]
Shard = Annotated[
    str | None,
    typer.Option(help="read shard i/n of the paths file (i from 0): every n-th file from the i-th"),
]
Threshold = Annotated[
    float,
    typer.Option(
        help="resemblance (estimated Jaccard of the pages' shingle sets) a verified pair must "
        "reach: higher finds only closer copies (`neardup scan --help`: which settings for what)"
    ),
]
Verbose = Annotated[
    bool,
    typer.Option("--verbose", "-v", help="list the files to read and the settings before starting"),
]
Method = Annotated[
    str,
    typer.Option(
        help="minhash (LSH bands), supershingles (Fetterly), exact, chunks, broder-min, "
        "broder-mod, broder-supershingles or simhash (docs/methods.md)"
    ),
]
Preset = Annotated[str | None, typer.Option(help="'fetterly' for the 2004 paper's settings")]
NumPerm = Annotated[
    int | None, typer.Option("--num-perm", help="min-hash values per page (default 128)")
]
SketchOpt = Annotated[
    str | None,
    typer.Option(
        "--sketch",
        help="oph (one permutation, densified: the default) or classic (K hash functions, "
        "the papers' own; the default of --method supershingles and --preset fetterly); "
        "a store of crawls keeps the sketch it started with",
    ),
]
ShingleSize = Annotated[int | None, typer.Option(help="words per shingle (default 5)")]
Wrap = Annotated[bool | None, typer.Option("--wrap/--no-wrap", help="wrap shingles around the end")]
Bands = Annotated[
    int | None, typer.Option(help="LSH bands (with --rows); tuned from the threshold if unset")
]
Rows = Annotated[int | None, typer.Option(help="rows per LSH band")]
Verify = Annotated[
    str, typer.Option(help="sketch (estimated resemblance) or exact (shingle Jaccard)")
]
Rule = Annotated[
    str,
    typer.Option(
        "--cluster-rule",
        help="core (the default): pages whose pairs reach (1 + threshold) / 2 form cores, and "
        "cores gather around centres, so chains of navigation-heavy pages do not merge "
        "unrelated pages; center: every member verified against its representative; "
        "transitive: connected components of the pairs",
    ),
]
MaxDf = Annotated[
    int,
    typer.Option(help="drop shingles found in more pages than this (Broder: 1000; 0 keeps all)"),
]
Workers = Annotated[int | None, typer.Option(min=1, help="worker processes (default: all cores)")]
BaseUrl = Annotated[str | None, typer.Option(help="base URL for pages of an HTML folder")]
ErrorPages = Annotated[bool, typer.Option(help="also compare pages with HTTP status 4xx/5xx")]
Links = Annotated[bool, typer.Option("--links/--no-links", help="extract the link graph")]
Text = Annotated[
    bool,
    typer.Option(
        "--text/--no-text",
        help="keep each page's text in the run (the web UI, reports and `neardup query` "
        "show or compare it); --no-text writes the table with no rows, saving its "
        "compression and disk",
    ),
]
DedupText = Annotated[
    bool | None,
    typer.Option(
        "--text/--no-text",
        help="keep each page's text in OUT/scan (default: not, as no link graph: the copy is "
        "made from the inputs)",
    ),
]
Containment = Annotated[
    float | None,
    typer.Option(help="report pages contained in others at least this much (broder-min/-mod)"),
]
Chunking = Annotated[
    str | None, typer.Option(help="chunks: lines4, lines2, sentences, paragraphs or document")
]
ChunkThreshold = Annotated[
    int | None, typer.Option(help="chunks: shared chunks T of a pair (default: per chunking)")
]
ChunkJoin = Annotated[
    str | None, typer.Option(help="chunks: iceberg (coarse counting) or sort (DuckDB join)")
]
Hamming = Annotated[int | None, typer.Option(help="simhash: largest Hamming distance (3)")]


def resolve_inputs_or_fail(
    inputs: list[str], paths_base: str | None, sample: int | None, shard: str | None
) -> list[str]:
    """The inputs with paths files replaced by their (sampled, sharded) files, or exit 2."""
    from neardup.cli.output import fail
    from neardup.ingest.paths_file import PathsFileError, resolve_inputs

    try:
        return resolve_inputs(inputs, paths_base, sample, shard)
    except PathsFileError as err:
        fail(str(err))


def refuse_remote_dedup(inputs: list[str]) -> None:
    """dedup copies records by their offsets and lengths from seekable local files; a URL
    or stdin has neither, so it is refused in one line before any work."""
    from neardup.cli.output import fail

    for raw in inputs:
        if raw == "-" or re.match(r"[A-Za-z][A-Za-z0-9+.-]*:/", raw):
            fail(f"dedup reads local files only: {raw} is a URL or stdin (download it first)")


# The options whose names differ from their `Settings` field's (the others are the field's
# name with dashes: num_perm is --num-perm).
_OPTION_OF_FIELD = {
    "wrap_shingles": "--wrap",
    "extract_links": "--links",
    "keep_text": "--text",
    "simhash_distance": "--hamming",
}


def _settings(
    preset: str | None,
    **options: Any,
) -> Settings:
    """The settings the options make (`options` are `Settings` fields); a refusal is raised
    in the command line's words, naming options (--num-perm) where `Settings` names its
    fields (num_perm)."""
    given = {k: v for k, v in options.items() if v is not None}
    try:
        if preset is None:
            return Settings(**given)
        if preset.lower() != "fetterly":
            raise SettingsError(f"unknown preset {preset!r} (known: fetterly)")
        if given.get("method") == "minhash":
            given.pop("method")  # the preset's own generator unless another was asked for
        return Settings.fetterly(**given)
    except SettingsError as err:
        raise SettingsError(in_option_words(str(err), options)) from None


def in_option_words(message: str, fields: Iterable[str]) -> str:
    """`message` with each of `fields` (Settings field names that are options of this
    command) written as its option: "num_perm must be at least 1" becomes "--num-perm must
    be at least 1". Whole words only, so `threshold` inside `core_threshold` stays."""
    for field in sorted(fields, key=len, reverse=True):
        option = _OPTION_OF_FIELD.get(field, "--" + field.replace("_", "-"))
        message = re.sub(rf"(?<![\w-]){re.escape(field)}(?![\w-])", option, message)
    return message
