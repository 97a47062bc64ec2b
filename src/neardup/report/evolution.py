"""The report's evolution section, for a store holding two or more crawls (issue 5).

`neardup report` is pointed either at a run directory or at a store of crawls. For a store,
the single-crawl sections describe its latest crawl (`report_target`), and this section
compares the crawls as `neardup evolution` does (Fetterly, Manasse & Najork 2003): Φ and Ψ
by the size of a URL's cluster in the earlier crawl, page change buckets, and the hosts found
in the same number of clusters, for every later crawl against the first (cumulative) and
against the one before it (consecutive). The figures are recomputed from the crawls each time
(`evolution(store, write=False)`), so the report never shows a stale
`evolution_*.parquet` and writes nothing into the store.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from neardup.crawls.evolution import CHANGES, evolution
from neardup.crawls.store import CRAWLS_FILE, list_crawls
from neardup.store import RunError


@dataclass(frozen=True)
class ReportTarget:
    """What a report path designates: the run whose tables fill the single-crawl sections,
    and the store it belongs to (None for a plain run)."""

    run: Path
    store: Path | None
    crawl: str | None  # label of `run` in the store
    crawls: int = 0  # crawls in the store


def find_store(path: Path) -> Path | None:
    """The store of a report path: the path itself when it holds `crawls.json`, or the store
    of one of its crawl directories (`store/crawls/LABEL`)."""
    if (path / CRAWLS_FILE).exists():
        return path
    store = path.parent.parent
    if path.parent.name == "crawls" and (store / CRAWLS_FILE).exists():
        return store
    return None


def report_target(path: str | Path) -> ReportTarget:
    """Resolve a `neardup report` argument: a run is reported as is; a store by its latest
    crawl; a crawl directory of a store as that crawl, with the store's evolution."""
    path = Path(path)
    store = find_store(path)
    if store is None:
        return ReportTarget(path, None, None)
    crawls = list_crawls(store)
    if not crawls:
        raise RunError(f"{store} holds no crawl; add one with `neardup scan --crawl`")
    if store == path:
        return ReportTarget(store / crawls[-1]["path"], store, crawls[-1]["label"], len(crawls))
    label = next((c["label"] for c in crawls if store / c["path"] == path), None)
    return ReportTarget(path, store, label, len(crawls))


def _rows(table: pa.Table) -> list[dict[str, Any]]:
    """Rows with a `kind` label: the pair of the first two crawls is both kinds."""
    out = []
    for row in table.to_pylist():
        kinds = [k for k in ("cumulative", "consecutive") if row[k]]
        out.append({**row, "kind": " + ".join(kinds)})
    return out


def _change_rows(summary: pa.Table) -> list[dict[str, Any]]:
    """The change summary pivoted: one row per (pair of crawls, size bucket), with the
    URLs and share of every change bucket, in the summary's order ('all' first)."""
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in _rows(summary):
        key = (r["crawl_m"], r["crawl_n"], r["bucket"])
        row = rows.setdefault(
            key,
            {
                **{k: r[k] for k in ("crawl_m", "crawl_n", "kind", "bucket")},
                "urls": 0,
                "counts": dict.fromkeys(CHANGES, 0),
                "shares": dict.fromkeys(CHANGES, 0.0),
            },
        )
        row["urls"] += r["urls"]
        row["counts"][r["change"]] = r["urls"]
        row["shares"][r["change"]] = r["share"]
    return list(rows.values())


def evolution_section(store: Path | None) -> dict[str, Any] | None:
    """The figures and tables of the evolution section (plots are drawn by `render_report`),
    or None, meaning no section, for a plain run or a store of one crawl: with nothing to
    compare, saying nothing is right."""
    if store is None:
        return None
    crawls = list_crawls(store)
    if len(crawls) < 2:
        return None
    result = evolution(store, write=False)
    labels = [c["label"] for c in crawls]
    phi_psi = _rows(result.phi_psi_summary)
    changes = _change_rows(result.change_summary)
    hosts = _rows(result.hosts)
    return {
        "crawls": crawls,
        "phi_psi": phi_psi,
        "changes": changes,
        "changes_list": list(CHANGES),
        "hosts": hosts,
        "figures": {
            "crawls": labels,
            "phi_psi": phi_psi,
            "changes": changes,
            "hosts": hosts,
        },
    }
