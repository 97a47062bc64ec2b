"""The HTML report of a run: replication, cluster sizes, collections, mirrors, thresholds.

`write_report(run, out)` writes one self-contained HTML file (inline CSS, inline SVG plots,
no external assets), so it can be mailed, archived next to the crawl, or opened offline.
`neardup report RUN -o report.html` is the command; RUN may also be a store of crawls, whose
latest crawl is reported with an evolution section (`report.evolution`). The figures come
from `report.data` (shared with the web UI in `neardup.ui`).
"""

from neardup.report.build import render_report, report_context, write_report

__all__ = ["render_report", "report_context", "write_report"]
