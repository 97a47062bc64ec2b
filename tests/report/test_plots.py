"""Plot details a reader relies on."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from neardup.report.plots import _plain_log_ticks


def test_log_axes_of_small_clusters_label_more_than_one_tick() -> None:
    """Clusters of 1 to 9 pages: the size axis must read 1, 2, 5 (once it showed only 1)."""
    fig, ax = plt.subplots()
    ax.loglog([1, 2, 3, 4, 6, 9], [100, 40, 10, 5, 2, 1], "o")
    _plain_log_ticks(ax)
    fig.canvas.draw()
    low, high = ax.get_xlim()
    shown = [
        t.get_text()
        for t, v in zip(ax.get_xticklabels(), ax.get_xticks(), strict=True)
        if low <= v <= high and t.get_text()
    ]
    plt.close(fig)
    assert {"1", "2", "5"} <= set(shown)
