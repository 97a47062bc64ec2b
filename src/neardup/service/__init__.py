"""Incremental duplicate service: a persistent two-tier index (versioned column files) and
its HTTP API.

The names below are loaded from their modules on first use, so that a module of this
package imported alone (`prepare`, `spark_feed` on a Spark executor, which sketch and never
open an index) does not load the index, the graph and their libraries (0.2 s)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from neardup.startup import loaded_on_first_use

if TYPE_CHECKING:
    from neardup.service.groups import elect, winner_key
    from neardup.service.handle import DuplicateIndex, open_index
    from neardup.service.index import ServiceIndex
    from neardup.service.layout import IndexBusy
    from neardup.service.lengths import (
        LengthMap,
        balanced_edges,
        dim_lengths,
        fine_bounds,
        length_partition_report,
        rho_estimate,
    )
    from neardup.service.popularity import RedirectGraph, effective_popularity
    from neardup.service.tier2 import SignatureStore
    from neardup.service.updates import (
        BatchReport,
        PageUpdate,
        ServiceError,
        ServiceOptions,
        as_update,
        html_to_text,
    )

__all__ = [
    "BatchReport",
    "DuplicateIndex",
    "IndexBusy",
    "LengthMap",
    "PageUpdate",
    "RedirectGraph",
    "ServiceError",
    "ServiceIndex",
    "ServiceOptions",
    "SignatureStore",
    "as_update",
    "balanced_edges",
    "dim_lengths",
    "effective_popularity",
    "elect",
    "fine_bounds",
    "html_to_text",
    "length_partition_report",
    "open_index",
    "rho_estimate",
    "winner_key",
]

_HOME = {
    "elect": "groups",
    "winner_key": "groups",
    "DuplicateIndex": "handle",
    "open_index": "handle",
    "ServiceIndex": "index",
    "IndexBusy": "layout",
    "LengthMap": "lengths",
    "balanced_edges": "lengths",
    "dim_lengths": "lengths",
    "fine_bounds": "lengths",
    "length_partition_report": "lengths",
    "rho_estimate": "lengths",
    "RedirectGraph": "popularity",
    "effective_popularity": "popularity",
    "SignatureStore": "tier2",
    "BatchReport": "updates",
    "PageUpdate": "updates",
    "ServiceError": "updates",
    "ServiceOptions": "updates",
    "as_update": "updates",
    "html_to_text": "updates",
}

__getattr__ = loaded_on_first_use(__name__, _HOME)
