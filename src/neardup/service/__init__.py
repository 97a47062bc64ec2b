"""Incremental duplicate service: a persistent two-tier index (versioned column files) and
its HTTP API."""

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
