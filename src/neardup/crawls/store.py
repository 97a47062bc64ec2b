"""The store of crawls: a folder of crawls of the same web, kept in order so they can be compared.

A *store* is a folder holding `crawls.json` (the crawl labels in order, with their fetch-time
range) and one ordinary run directory per crawl under `crawls/LABEL/`, scanned by either
engine (single Parquet files and `signatures.npy`, or a Spark run's datasets). All crawls of
a store must be sketched with the same sketch settings, so their min-hash signatures compare;
this module is the one place that writes a store, so it is the one place that checks that.
Cluster evolution (`evolution.py`), lost and found (`lost_found.py`) and clusters across
crawls (`cross_crawl.py`) only read it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb

from neardup.config import Settings, SettingsError
from neardup.crawls.band_index import build_band_index
from neardup.pipeline.executors import ScanEngine
from neardup.pipeline.scan import ScanResult, scan
from neardup.store import load_settings
from neardup.store.outputs import open_folder, replace_file_atomically

CRAWLS_FILE = "crawls.json"
STORE_KIND = "store of crawls"


class StoreError(RuntimeError):
    """A store that is missing, empty, or holds an unknown crawl or URL."""


def list_crawls(store: str | Path) -> list[dict[str, Any]]:
    """The crawls of a store, oldest first, as recorded in `crawls.json`."""
    path = Path(store) / CRAWLS_FILE
    if not path.exists():
        return []
    return json.loads(path.read_text(encoding="utf-8"))["crawls"]


def crawl_dir(store: str | Path, label: str | None = None) -> Path:
    """The run directory of a crawl (the latest when `label` is None)."""
    crawls = list_crawls(store)
    if not crawls:
        raise StoreError(f"{store} holds no crawl; add one with `neardup crawl`")
    if label is None:
        return Path(store) / crawls[-1]["path"]
    for entry in crawls:
        if entry["label"] == label:
            return Path(store) / entry["path"]
    known = ", ".join(e["label"] for e in crawls)
    raise StoreError(f"no crawl {label!r} in {store} (known: {known})")


def _write_crawls(store: Path, crawls: list[dict[str, Any]]) -> None:
    """Atomically: a reader sees the old list or the new one, never half a file."""
    text = json.dumps({"crawls": crawls}, indent=2) + "\n"
    replace_file_atomically(store / CRAWLS_FILE, text.encode("utf-8"))


def stored_sketch(store: str | Path) -> str | None:
    """The sketch (`Settings.sketch`) of the crawls a store holds, None for an empty or new
    store. A store keeps the sketch it started with: a store begun before one-permutation
    hashing became the default holds classic sketches, and a crawl added without naming a
    sketch must make the same kind to be compared with them."""
    crawls = list_crawls(store) if Path(store).exists() else []
    return load_settings(Path(store) / crawls[0]["path"]).sketch if crawls else None


def add_crawl(
    inputs: list[str | Path],
    store: str | Path,
    label: str,
    settings: Settings | None = None,
    workers: int | None = None,
    base_url: str | None = None,
    force: bool = False,
    engine: str | ScanEngine = "embedded",
) -> ScanResult:
    """Scan `inputs` into `store/crawls/LABEL/`, index it, and list it in `crawls.json`.

    Refuses settings whose sketches could not be compared with the crawls already stored,
    before any work, since evolution and lost-and-found compare signatures across crawls.
    Without `settings`, the defaults with the store's sketch (`stored_sketch`).

    `engine` is the scan's (`pipeline.scan.scan`): 'embedded', 'spark' or an engine object
    such as the CLI builds. A Spark crawl keeps its tables as the datasets the executors
    wrote; the band index is built here by streaming its sketches in batches, and every
    reader of the store reads either layout in place, so crawls of both engines mix.
    """
    if not label or "/" in label or label.startswith("."):
        raise StoreError(f"bad crawl label {label!r}: use a plain name such as 2024-04")
    store = Path(store)
    open_folder(store, STORE_KIND, inputs)  # never a folder of the user's, never an input
    crawls = list_crawls(store)
    if settings is None:  # the store's own sketch, or the defaults for a new store
        settings = Settings(sketch=stored_sketch(store))
    for entry in crawls:
        other = load_settings(store / entry["path"])
        try:
            settings.check_compatible(other)
        except SettingsError as err:
            raise SettingsError(f"crawl {entry['label']!r} of {store}: {err}") from None
    result = scan(
        inputs, store / "crawls" / label, settings, workers, base_url, force, engine=engine
    )
    build_band_index(result.path)
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        first, last, pages = con.execute(
            # ISO strings from DuckDB: a TIMESTAMPTZ fetched into Python would need pytz.
            "SELECT strftime(min(fetched_at), '%Y-%m-%dT%H:%M:%SZ'), "
            "strftime(max(fetched_at), '%Y-%m-%dT%H:%M:%SZ'), count(*) FROM read_parquet(?)",
            [str(result.path / "pages.parquet")],  # a file, or a Spark run's dataset folder
        ).fetchone()
    finally:
        con.close()
    entry = {
        "label": label,
        "path": f"crawls/{label}",
        "pages": int(pages),
        "fetched_from": None if first is None else str(first),
        "fetched_to": None if last is None else str(last),
    }
    labels = [e["label"] for e in crawls]
    if label in labels:
        crawls[labels.index(label)] = entry
    else:
        crawls.append(entry)
    _write_crawls(store, crawls)
    return result
