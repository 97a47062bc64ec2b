"""The independent reference for the service's groups: `neardup.scan` of the same pages."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from itertools import count
from pathlib import Path

import duckdb
import pytest

from neardup import scan
from neardup.config import Settings

Partition = set[frozenset[str]]


def scan_partition(
    pages: Mapping[str, str | dict[str, str]], folder: Path, settings: Settings
) -> Partition:
    """The scan's clusters (by URL) of `pages` (url -> text, or a JSONL row's other fields
    such as `{"html": ...}`) written as JSONL; pages the scan leaves without a cluster are
    groups of their own, as in the service."""
    folder.mkdir(parents=True)
    path = folder / "pages.jsonl"
    with path.open("w", encoding="utf-8") as fh:
        for url, text in sorted(pages.items()):
            row = {"text": text} if isinstance(text, str) else text
            fh.write(json.dumps({"url": url, **row}) + "\n")
    run = scan([path], folder / "run", settings, workers=1).path
    con = duckdb.connect(str(run / "neardup.duckdb"), read_only=True)
    try:
        rows = con.sql("SELECT url, cluster_id FROM pages").fetchall()
    finally:
        con.close()
    groups: dict[object, set[str]] = {}
    for url, cluster in rows:
        groups.setdefault(("c", cluster) if cluster is not None else ("u", url), set()).add(url)
    return {frozenset(g) for g in groups.values()}


@pytest.fixture
def scanned(tmp_path: Path) -> Callable[[Mapping[str, str | dict[str, str]], Settings], Partition]:
    """`scan_partition` in a fresh folder under the test's tmp_path."""
    n = count()

    def run(pages: Mapping[str, str | dict[str, str]], settings: Settings) -> Partition:
        return scan_partition(pages, tmp_path / f"scan{next(n)}", settings)

    return run
