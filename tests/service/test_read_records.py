"""The index's read records (`index/state/read_records.py`) against the API's answers
(`service/api_models.py`): the same fields in the same order, so a field added to a record
and not to its model (or the reverse) fails here, and the JSON the API gives keeps the
records' names and order."""

from __future__ import annotations

import dataclasses
import json

import pytest

from neardup.index.state.read_records import (
    CheckMatch,
    CheckResult,
    GroupMember,
    GroupView,
    IndexCounts,
    UrlStatus,
)
from neardup.service.api_models import (
    CheckMatchOut,
    CheckResultOut,
    GroupMemberOut,
    GroupViewOut,
    SummaryOut,
    UrlStatusOut,
    answer,
)

PAIRS = [
    (UrlStatus, UrlStatusOut),
    (GroupMember, GroupMemberOut),
    (GroupView, GroupViewOut),
    (CheckMatch, CheckMatchOut),
    (CheckResult, CheckResultOut),
]


def _fields(record: type) -> list[str]:
    return [f.name for f in dataclasses.fields(record)]


@pytest.mark.parametrize(("record", "model"), PAIRS, ids=[r.__name__ for r, _ in PAIRS])
def test_each_answer_declares_exactly_its_record_fields(record, model):
    assert list(model.model_fields) == _fields(record)


def test_the_summary_holds_the_counts_between_the_store_and_the_settings():
    assert list(SummaryOut.model_fields) == [
        "store",
        *_fields(IndexCounts),
        "threshold",
        "bands",
        "rows",
    ]


def test_the_records_are_frozen():
    counts = IndexCounts(3, 1, 2, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        counts.pages = 4  # type: ignore[misc]


def test_an_answer_built_from_a_record_is_the_json_of_its_fields():
    """Nested records (members, matches) and tuples come out as JSON objects and arrays,
    in the records' field order, with the values written by hand here."""
    view = GroupView(
        7,
        "http://a/1",
        2,
        (
            GroupMember("http://a/1", True, False, 1.0, 3, 5),
            GroupMember("http://a/2", False, True, 0.875, 0, 0),
        ),
        ("http://r/1",),
    )
    got = answer(GroupViewOut, view).model_dump_json()
    assert json.loads(got) == {
        "group_id": 7,
        "winner_url": "http://a/1",
        "size": 2,
        "members": [
            {
                "url": "http://a/1",
                "winner": True,
                "verified": False,
                "resemblance": 1.0,
                "links_in": 3,
                "popularity": 5,
            },
            {
                "url": "http://a/2",
                "winner": False,
                "verified": True,
                "resemblance": 0.875,
                "links_in": 0,
                "popularity": 0,
            },
        ],
        "redirects": ["http://r/1"],
    }
    assert got.startswith('{"group_id":7,"winner_url":"http://a/1","size":2,"members":[{"url"')
    check = CheckResult(False, None, None, None, (), 12)
    assert answer(CheckResultOut, check).model_dump_json() == (
        '{"is_duplicate":false,"group_id":null,"winner_url":null,"resemblance":null,'
        '"matches":[],"length":12}'
    )
