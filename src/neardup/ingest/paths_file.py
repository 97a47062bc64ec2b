"""Paths files: the list of a published crawl's files, as Common Crawl publishes them.

A crawl is published as `warc.paths.gz` (or `wet.paths.gz`, `wat.paths.gz`): one path per
line, relative to the data host (https://data.commoncrawl.org/ by default), gzipped. Naming
that file is how a user points a scan at a crawl; `--sample N` and `--shard i/n` cut it down
to what one machine should read. Both are deterministic (no random seed, no clock), so the
same command on another machine selects the same files, and the n shards of a list are
disjoint and cover it.
"""

from __future__ import annotations

import gzip
from typing import Any

import xxhash

from neardup.ingest.remote import RetryingReader, is_remote, url_name

DEFAULT_PATHS_BASE = "https://data.commoncrawl.org/"
_SUFFIXES = (".paths", ".paths.gz")


class PathsFileError(ValueError):
    """A paths file that cannot be read, or a --sample / --shard that makes no sense."""


def is_paths_file(path: str) -> bool:
    """Whether `path` names a paths file (`*.paths` or `*.paths.gz`), local or a URL."""
    return path != "-" and url_name(path).lower().endswith(_SUFFIXES)


def parse_shard(text: str) -> tuple[int, int]:
    """`i/n` as (i, n): shard i (counted from 0) of n."""
    index, sep, count = text.partition("/")
    try:
        i, n = int(index), int(count)
    except ValueError:
        i, n = -1, 0
    if not sep or n < 1 or not 0 <= i < n:
        raise PathsFileError(f"--shard {text!r}: give i/n with 0 <= i < n, such as 0/4")
    return i, n


def read_paths_file(path: str, base: str = DEFAULT_PATHS_BASE) -> list[str]:
    """The files a paths file lists, in its order, each joined to `base` unless it is a URL
    itself."""
    return join_base(listed_paths(path), base)


def join_base(entries: list[str], base: str) -> list[str]:
    """Each entry joined to `base`, unless it is a URL itself."""
    root = base if base.endswith("/") else base + "/"
    return [e if "://" in e else root + e.lstrip("/") for e in entries]


def listed_paths(path: str, what: str = "paths file") -> list[str]:
    """The entries of a paths file as written (blank lines and `#` comments skipped); the
    whole list is read, since a crawl's 90,000 paths are a few MB. Any list of one entry a
    line is read so (`what` names it in an error): `neardup add --remove` reads its URLs."""
    try:
        raw: Any = RetryingReader(path) if is_remote(path) else open(path, "rb")  # noqa: SIM115
    except OSError as exc:
        raise PathsFileError(f"{path}: cannot read {what}: {exc}") from None
    try:
        chunks = []
        with raw:
            while chunk := raw.read(1 << 20):
                chunks.append(chunk)
        data = b"".join(chunks)
        text = (gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data).decode("utf-8")
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise PathsFileError(f"{path}: cannot read {what}: {exc}") from None
    return listed_entries(text)


def listed_entries(text: str) -> list[str]:
    """The entries of a list written one a line: surrounding blanks stripped, blank lines
    and `#` comments skipped."""
    entries = (line.strip() for line in text.splitlines())
    return [e for e in entries if e and not e.startswith("#")]


def select(entries: list[str], sample: int | None = None, shard: str | None = None) -> list[str]:
    """`sample` entries (those with the smallest hash of their path, kept in list order),
    then the `shard` i/n of them (every n-th entry from the i-th). Hashing the entries as
    listed, not joined to a base, makes a mirror of the crawl give the same sample."""
    chosen = entries
    if sample is not None:
        if sample < 1:
            raise PathsFileError(f"--sample {sample}: give a number of files, 1 or more")
        ranked = sorted(range(len(chosen)), key=lambda k: _rank(chosen[k]))
        keep = set(ranked[:sample])
        chosen = [e for k, e in enumerate(chosen) if k in keep]
    if shard is not None:
        i, n = parse_shard(shard)
        chosen = chosen[i::n]
    return chosen


def _rank(entry: str) -> int:
    """A fixed pseudo-random rank: the same on every machine and every run."""
    return xxhash.xxh64_intdigest(entry.encode())


def resolve_inputs(
    inputs: list[str],
    paths_base: str | None = None,
    sample: int | None = None,
    shard: str | None = None,
) -> list[str]:
    """The inputs with every paths file replaced by the files it lists, cut down by
    `sample` and `shard` (which apply to paths files only, each on its own list)."""
    if (sample is not None or shard is not None) and not any(map(is_paths_file, inputs)):
        raise PathsFileError("--sample and --shard select from a paths file: give one")
    out: list[str] = []
    for path in inputs:
        if is_paths_file(path):
            listed = listed_paths(path)
            if not listed:  # else the scan would end with a puzzling "no input given"
                raise PathsFileError(f"{path}: the paths file lists no files")
            sampled = select(listed, sample)
            chosen = select(sampled, shard=shard)
            if not chosen:
                raise PathsFileError(
                    f"{path}: --shard {shard} selects none of {len(sampled)} file(s);"
                    " give fewer shards"
                )
            out.extend(join_base(chosen, paths_base or DEFAULT_PATHS_BASE))
        else:
            out.append(path)
    return out


__all__ = [
    "DEFAULT_PATHS_BASE",
    "PathsFileError",
    "is_paths_file",
    "join_base",
    "listed_entries",
    "listed_paths",
    "parse_shard",
    "read_paths_file",
    "resolve_inputs",
    "select",
]
