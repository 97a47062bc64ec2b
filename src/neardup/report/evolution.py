"""Hook for the evolution plots (Φ/Ψ change rates, change buckets) of multi-crawl stores.

Crawl-to-crawl evolution needs a store holding several crawls of the same sites (issue 5),
which does not exist yet: a run directory holds one scan. `evolution_section` is where the
report asks for that section; it returns None for every store today, and the template renders
nothing for None. When multi-crawl stores land, this function detects them (several crawl
ids) and returns the figures and plots; the template's `evolution` block shows them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import duckdb


def evolution_section(run: Path, con: duckdb.DuckDBPyConnection) -> dict[str, Any] | None:
    """The evolution section of the report, or None when the store holds one crawl.

    HOOK (issue 5): always None until multi-crawl stores exist.
    """
    return None
