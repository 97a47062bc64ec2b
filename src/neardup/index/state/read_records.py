"""What the reads of an open index answer (`reads.py`), as frozen records.

Why records and not dicts: the HTTP API's response models (`service/api_models.py`), the
Python handle and `neardup add --json` all give these answers; a record names its fields
once, here, with their types, and a test pins each against its API model, so a field
added to one and not the other fails (`tests/service/test_read_records.py`). Lists are
tuples, so a record is what it was when read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class UrlStatus:
    """A stored URL's group, winner and duplicate status (`GET /status`)."""

    url: str
    removed: bool
    redirect_chain: tuple[str, ...]  # the URLs it redirects through, after itself
    final_url: str
    group_id: int | None
    winner_url: str | None
    is_duplicate: bool
    verified: bool
    resemblance: float | None  # to its group's winner


@dataclass(frozen=True)
class GroupMember:
    """A page of a group, as `GroupView` lists it."""

    url: str
    winner: bool
    verified: bool
    resemblance: float  # to the group's winner
    links_in: int
    popularity: int


@dataclass(frozen=True)
class GroupView:
    """A group: its winner, members (the winner first) and the redirects into it
    (`GET /groups/{id}`)."""

    group_id: int
    winner_url: str
    size: int
    members: tuple[GroupMember, ...]
    redirects: tuple[str, ...]


@dataclass(frozen=True)
class CheckMatch:
    """A stored page a checked text resembles by at least the threshold."""

    url: str
    group_id: int | None
    resemblance: float


@dataclass(frozen=True)
class CheckResult:
    """Which stored group a text would join, without adding it (`POST /check`)."""

    is_duplicate: bool
    group_id: int | None
    winner_url: str | None
    resemblance: float | None  # to that group's winner
    matches: tuple[CheckMatch, ...]  # the ten most alike, most alike first
    length: int  # the text's words


@dataclass(frozen=True)
class IndexCounts:
    """Live pages, redirects, groups and groups of more than one page."""

    pages: int
    redirects: int
    groups: int
    duplicate_groups: int


def as_dict(record: Any) -> dict[str, Any]:
    """A record as the plain dict of its fields (nested records too), in field order."""
    return asdict(record)
