"""Assemble the report: figures from `report.data`, plots from `report.plots`, one template.

Why one HTML file with everything inline: a report is looked at long after the scan, often
on another machine and offline; a file that needs a CDN or a sidecar folder breaks there.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from neardup.report import data, evolution_plots, plots
from neardup.report.analyses import load_link_analyses
from neardup.report.evolution import evolution_section, report_target
from neardup.report.templates import environment, script_json
from neardup.store import load_settings, load_summary, open_run
from neardup.store.outputs import replacing_file

TEMPLATE = "report.html.j2"
MAX_COLLECTION_POINTS = 5000  # the scatter plot; the table shows the top rows only


def report_context(run: str | Path, top: int = 20, with_avoid: bool = True) -> dict[str, Any]:
    """Every figure of the report, as plain values (also embedded in it as JSON).

    `run` is a run directory, a store of crawls (its latest crawl fills the single-crawl
    sections) or one crawl directory of a store; for a store of two or more crawls the
    evolution section compares them."""
    target = report_target(run)
    run = target.run
    summary = load_summary(run)
    settings = load_settings(run).to_dict()
    con = open_run(run)
    try:
        replication = data.replication_histogram(con)
        sizes = data.cluster_sizes(con)
        largest = data.largest_clusters(con, top)
        histogram = data.similarity_histogram(con)
        band = data.banding(summary, settings)
        savings = data.savings(con)
        links = load_link_analyses(run, con, with_avoid=with_avoid)
        if links.avoid is not None:
            data.add_avoid_savings(savings, links.avoid.to_pylist(), data.crawl_totals(con))
    finally:
        con.close()
    evolution = evolution_section(target.store)
    collection_rows = links.clusters.slice(0, MAX_COLLECTION_POINTS).to_pylist()
    mirrors = links.mirrors.to_pylist()
    figures = {
        "replication": replication,
        "cluster_sizes": {
            "sizes": sizes.sizes,
            "counts": sizes.counts,
            "slope": sizes.slope,
        },
        "largest_clusters": [
            {k: c[k] for k in ("cluster_id", "size", "n_hosts", "representative_url")}
            for c in largest
        ],
        "collections": [
            {k: c[k] for k in ("collection_cluster_id", "cardinality", "size", "pages")}
            for c in collection_rows
        ],
        "mirrors": [
            {k: m[k] for k in ("host_a", "host_b", "shared_pages", "kind", "verdict")}
            for m in mirrors
        ],
        "similarity_histogram": histogram,
        "banding": {
            "bands": band.bands,
            "rows": band.rows,
            "threshold": band.threshold,
            "p_at_threshold": band.at_threshold,
        },
        "savings": {
            "pages": savings.pages,
            "bytes": savings.bytes,
            "compared_pages": savings.compared_pages,
            "compared_bytes": savings.compared_bytes,
            "avoid_pages": savings.avoid_pages,
            "avoid_bytes": savings.avoid_bytes,
            "crawl_pages": savings.crawl_pages,
            "crawl_bytes": savings.crawl_bytes,
        },
        "computed": links.computed,
        "evolution": evolution["figures"] if evolution else None,
    }
    return {
        "run": str(run),
        "store": None
        if target.store is None
        else {"path": str(target.store), "crawl": target.crawl, "crawls": target.crawls},
        "generated": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "summary": summary,
        "settings": settings,
        "replication": replication,
        "sizes": sizes,
        "largest": largest,
        "collections": collection_rows,
        "n_collections": links.clusters.num_rows,
        "mirrors": mirrors,
        "histogram": histogram,
        "band": band,
        "savings": savings,
        "computed": links.computed,
        "evolution": evolution,
        "figures": figures,
        "top": top,
    }


def render_report(run: str | Path, top: int = 20, with_avoid: bool = True) -> str:
    """The report as one HTML string: inline CSS, inline SVG plots, no external assets."""
    ctx = report_context(run, top, with_avoid)
    svgs = {
        "replication": plots.replication_plot(ctx["replication"]),
        "sizes": plots.size_plot(ctx["sizes"]),
        "similarity": plots.similarity_plot(ctx["histogram"], ctx["band"]),
        "collections": plots.collections_plot(ctx["collections"]) if ctx["collections"] else "",
    }
    evolution = ctx["evolution"]
    if evolution:
        labels = evolution["figures"]["crawls"]
        svgs["evolution_phi_psi"] = evolution_plots.phi_psi_plot(evolution["phi_psi"], labels)
        svgs["evolution_changes"] = evolution_plots.change_plot(
            evolution["changes"], evolution["changes_list"]
        )
    return (
        environment()
        .get_template(TEMPLATE)
        .render(**ctx, plots=svgs, data_json=script_json(ctx["figures"]))
    )


def write_report(
    run: str | Path, out: str | Path, top: int = 20, with_avoid: bool = True, force: bool = False
) -> Path:
    """Write the report of `run` to `out` (an .html file); returns the path.

    `out` may not lie inside the run, and replaces only an earlier neardup report, with
    `force` (see `neardup.store.outputs`)."""
    with replacing_file(out, [run], force) as tmp:
        tmp.write_text(render_report(run, top, with_avoid), encoding="utf-8")
    return Path(out)
