"""The report's plots, drawn with matplotlib (Agg) as inline SVG.

SVG keeps the report one self-contained, offline file that stays sharp when zoomed, and text
stays text (`svg.fonttype = none`), so the figures are searchable. A fixed hash salt and no
date make the same run give byte-identical plots.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.figure import Figure

from neardup.report.data import Banding, SizeDistribution

EXACT = "#4c72b0"
NEAR = "#dd8452"
STYLE = {
    "svg.fonttype": "none",
    "svg.hashsalt": "neardup",
    "font.size": 9,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
}


@contextmanager
def new_figure(width: float = 6.4, height: float = 3.4) -> Iterator[Figure]:
    """A figure in the report's style, closed afterwards (pyplot keeps figures alive)."""
    with plt.rc_context(STYLE):
        fig = plt.figure(figsize=(width, height))
        try:
            yield fig
        finally:
            plt.close(fig)


def to_svg(fig: Figure) -> str:
    """The figure as an `<svg>` element (no XML prolog, so it can sit inside HTML)."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", bbox_inches="tight", metadata={"Date": None})
    text = buf.getvalue()
    return text[text.index("<svg") :]


def _plain_log_ticks(ax: Any) -> None:
    """Log axes labelled 1, 2, 5, 10, 20, ... rather than 2×10⁰: sizes are counts of pages, and
    a crawl whose clusters are all under 10 pages still gets more than one labelled tick."""
    fmt = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(fmt)
        axis.set_minor_formatter(matplotlib.ticker.NullFormatter())


def replication_plot(rows: list[dict[str, Any]]) -> str:
    """Grouped bars: share of pages per copy bucket, exact beside near."""
    with new_figure() as fig:
        ax = fig.add_subplot()
        x = range(len(rows))
        ax.bar(
            [i - 0.2 for i in x],
            [r["exact_share"] for r in rows],
            0.4,
            label="exact copies",
            color=EXACT,
        )
        ax.bar(
            [i + 0.2 for i in x],
            [r["near_share"] for r in rows],
            0.4,
            label="near-duplicates",
            color=NEAR,
        )
        ax.set_xticks(list(x), [r["bucket"] for r in rows])
        ax.set_xlabel("other copies of the page")
        ax.set_ylabel("share of compared pages")
        ax.yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        ax.legend(frameon=False)
        return to_svg(fig)


def size_plot(dist: SizeDistribution) -> str:
    """Clusters per size on log-log axes, with the fitted power law over sizes >= 2."""
    with new_figure() as fig:
        ax = fig.add_subplot()
        ax.loglog(dist.sizes, dist.counts, "o", color=NEAR, label="clusters")
        if dist.slope is not None and dist.intercept is not None:
            fit = [s for s in dist.sizes if s >= 2]
            line = [10**dist.intercept * s**dist.slope for s in fit]
            ax.loglog(fit, line, "-", color=EXACT, label=f"power law, slope {dist.slope:.2f}")
        _plain_log_ticks(ax)
        ax.set_xlabel("cluster size (pages)")
        ax.set_ylabel("number of clusters")
        ax.legend(frameon=False)
        return to_svg(fig)


def collections_plot(clusters: list[dict[str, Any]]) -> str:
    """Each collection cluster as a point: cardinality (copies) × size (pages per copy)."""
    with new_figure() as fig:
        ax = fig.add_subplot()
        ax.scatter(
            [c["cardinality"] for c in clusters],
            [c["size"] for c in clusters],
            s=30,
            color=EXACT,
            alpha=0.7,
        )
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log_ticks(ax)
        ax.set_xlabel("cardinality (copies)")
        ax.set_ylabel("size (pages of the largest copy)")
        return to_svg(fig)


def similarity_plot(histogram: list[tuple[float, int]], band: Banding) -> str:
    """Verified pairs per similarity bin, under the banding S-curve of the scan."""
    with new_figure(6.4, 3.6) as fig:
        ax = fig.add_subplot()
        if histogram:
            width = 0.01
            ax.bar(
                [b + width / 2 for b, _ in histogram],
                [n for _, n in histogram],
                width,
                color=NEAR,
                label="verified pairs",
            )
        ax.set_xlim(0, 1)
        ax.set_xlabel("resemblance r")
        ax.set_ylabel("verified pairs")
        ax.axvline(band.threshold, color="grey", ls="--", lw=1)
        ax.text(
            band.threshold,
            0.5,
            f"threshold {band.threshold:g} ",
            color="grey",
            transform=ax.get_xaxis_transform(),
            ha="right",
            va="center",
            rotation=90,
        )
        if band.curve:
            ax2 = ax.twinx()
            ax2.plot(
                [r for r, _ in band.curve],
                [p for _, p in band.curve],
                color=EXACT,
                label=f"P(candidate), {band.bands} bands × {band.rows} rows",
            )
            ax2.set_ylim(0, 1.02)
            ax2.set_ylabel("probability of becoming a candidate")
            ax2.grid(False)
            ax2.spines["right"].set_visible(True)
            ax2.legend(loc="upper left", frameon=False)
        return to_svg(fig)
