"""A service index's state as two engines' adds can be compared by (tests of `neardup add`
on Spark against the embedded engine)."""

from __future__ import annotations

from pathlib import Path

from neardup.index.state.read_records import as_dict
from neardup.service import ServiceIndex


def index_state(store: Path) -> dict[str, object]:
    """Every URL's status with its group named by its members, not by its number (numbers
    follow the batches, which differ between the engines), and the index's counts."""
    with ServiceIndex(store, read_only=True) as ix:
        out: dict[str, object] = {}
        for url in sorted(ix.pages):
            record = ix.status(url)
            assert record is not None
            status = as_dict(record)
            gid = status.pop("group_id")
            status["group"] = None if gid is None else sorted(ix.groups.get(gid) or ())
            out[url] = status
        out["counts"] = as_dict(ix.counts())
        return out
