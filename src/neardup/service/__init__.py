"""Incremental duplicate service: a persistent two-tier index (DuckDB) and its HTTP API."""

from neardup.service.index import (
    BatchReport,
    PageUpdate,
    ServiceError,
    ServiceIndex,
    ServiceOptions,
    html_to_text,
    partition_group,
    winner_key,
)
from neardup.service.lengths import length_partition_report, word_lengths

__all__ = [
    "BatchReport",
    "PageUpdate",
    "ServiceError",
    "ServiceIndex",
    "ServiceOptions",
    "html_to_text",
    "length_partition_report",
    "partition_group",
    "winner_key",
    "word_lengths",
]
