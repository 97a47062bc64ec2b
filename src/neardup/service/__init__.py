"""Incremental duplicate service: the HTTP API of the index (`neardup.index`), its models,
the bulk body and the served copies.

The index's public names keep their address here (`from neardup.service import
ServiceIndex, PageUpdate`), loaded from their modules on first use, so that importing a
module of this package does not load the index, the graph and their libraries (0.2 s)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from neardup.startup import loaded_on_first_use

if TYPE_CHECKING:
    from neardup.index.files.store import IndexBusy
    from neardup.index.handle import DuplicateIndex, open_index
    from neardup.index.service_index import ServiceIndex
    from neardup.index.state.lengths import (
        LengthMap,
        balanced_edges,
        dim_lengths,
        fine_bounds,
        length_partition_report,
        rho_estimate,
    )
    from neardup.index.state.popularity import RedirectGraph, effective_popularity
    from neardup.index.state.tier2 import SignatureStore
    from neardup.index.state.updates import (
        BatchReport,
        PageUpdate,
        ServiceError,
        ServiceOptions,
        as_update,
        html_to_text,
    )
    from neardup.index.state.winner_rule import elect, winner_key

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

# Where each public name lives now (issue 48: the index is `neardup.index`, below this
# package); the names keep their old address here.
_HOME = {
    "elect": "index.state.winner_rule",
    "winner_key": "index.state.winner_rule",
    "DuplicateIndex": "index.handle",
    "open_index": "index.handle",
    "ServiceIndex": "index.service_index",
    "IndexBusy": "index.files.store",
    "LengthMap": "index.state.lengths",
    "balanced_edges": "index.state.lengths",
    "dim_lengths": "index.state.lengths",
    "fine_bounds": "index.state.lengths",
    "length_partition_report": "index.state.lengths",
    "rho_estimate": "index.state.lengths",
    "RedirectGraph": "index.state.popularity",
    "effective_popularity": "index.state.popularity",
    "SignatureStore": "index.state.tier2",
    "BatchReport": "index.state.updates",
    "PageUpdate": "index.state.updates",
    "ServiceError": "index.state.updates",
    "ServiceOptions": "index.state.updates",
    "as_update": "index.state.updates",
    "html_to_text": "index.state.updates",
}

__getattr__ = loaded_on_first_use("neardup", _HOME)
