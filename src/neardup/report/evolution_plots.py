"""Plots of the report's evolution section, in the style of Fetterly et al. (2003).

Figures 4 and 5 of the paper draw, for each week n, the average Φ and Ψ of the URLs grouped
by the size of their week-1 cluster, one curve per size range; figure 10 stacks the six
page-change buckets per cluster-size range. These are the same, drawn with the shared
matplotlib setup of `report.plots` (inline SVG, deterministic output).
"""

from __future__ import annotations

from typing import Any

import matplotlib

from neardup.report.plots import new_figure, to_svg

# From most change (red) to none (blue), so the bars read like a heat scale.
CHANGE_COLORS = ("#b2182b", "#ef8a62", "#f4c542", "#9ecae1", "#4292c6", "#08519c")


def _bucket_lo(bucket: str) -> int:
    """Lower bound of a size bucket label ('1', '2-10', '11-100', …), to order the curves."""
    return int(bucket.split("-")[0])


def phi_psi_plot(rows: list[dict[str, Any]], labels: list[str]) -> str:
    """Φ and Ψ side by side against the later crawl, one colour per cluster-size bucket of the
    earlier crawl: solid lines compare with the first crawl (cumulative), dashed lines with
    the crawl before (consecutive; drawn only when they differ, from three crawls on)."""
    buckets = sorted({r["bucket"] for r in rows}, key=_bucket_lo)
    colors = matplotlib.colormaps["tab10"].colors
    consecutive_differs = any(r["consecutive"] and not r["cumulative"] for r in rows)
    with new_figure(8.0, 3.4) as fig:
        axes = fig.subplots(1, 2, sharey=True)
        for ax, measure, name in ((axes[0], "phi", "Φ (containment)"), (axes[1], "psi", "Ψ")):
            for i, bucket in enumerate(buckets):
                color = colors[i % len(colors)]
                lines = (("cumulative", "-", color), ("consecutive", "--", "none"))
                for flag, style, fill in lines:
                    if flag == "consecutive" and not consecutive_differs:
                        continue
                    pts = [r for r in rows if r["bucket"] == bucket and r[flag]]
                    if not pts:
                        continue
                    label = f"{bucket}, {'first' if flag == 'cumulative' else 'previous'} crawl"
                    ax.plot(
                        [labels.index(r["crawl_n"]) for r in pts],
                        [r[measure] for r in pts],
                        style,
                        marker="o",
                        color=color,
                        markerfacecolor=fill,
                        label=label,
                    )
            ax.set_xticks(range(1, len(labels)), labels[1:])
            ax.set_xlim(0.5, len(labels) - 0.5)
            ax.set_ylim(0, 1.05)
            ax.set_xlabel("later crawl n")
            ax.set_title(f"average {name}", fontsize=9)
        axes[0].set_ylabel("average over URLs")
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(
            handles,
            names,
            title="cluster size in the earlier crawl",
            loc="center left",
            bbox_to_anchor=(1.0, 0.5),
            frameon=False,
        )
        return to_svg(fig)


def change_plot(rows: list[dict[str, Any]], changes: list[str]) -> str:
    """One horizontal bar per (pair of crawls, size bucket), split into the six change
    buckets by share of URLs (the paper's figure 10, with an 'all sizes' bar per pair)."""
    height = 1.2 + 0.3 * len(rows)
    with new_figure(8.0, height) as fig:
        ax = fig.add_subplot()
        names = [
            f"{r['crawl_m']} → {r['crawl_n']} · "
            + ("all sizes" if r["bucket"] == "all" else f"size {r['bucket']}")
            for r in rows
        ]
        left = [0.0] * len(rows)
        for change, color in zip(changes, CHANGE_COLORS, strict=True):
            widths = [r["shares"][change] for r in rows]
            ax.barh(names, widths, left=left, color=color, label=change, height=0.7)
            left = [a + b for a, b in zip(left, widths, strict=True)]
        ax.invert_yaxis()
        ax.set_xlim(0, 1)
        ax.xaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
        ax.set_xlabel("share of URLs fetched in both crawls")
        ax.grid(axis="y", visible=False)
        ax.legend(
            ncols=len(changes),
            loc="lower left",
            bbox_to_anchor=(0, 1.0),
            frameon=False,
            fontsize=8,
        )
        return to_svg(fig)
