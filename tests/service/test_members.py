"""The groups as arrays plus an overlay (`GroupMembers`, `Winners`) answer as a dict of sets
and a dict do, from the groups as opened through the changes of batches."""

from __future__ import annotations

import pyarrow as pa
import pytest
from crawl_texts import near_copies
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.index.files.store import GROUP_SCHEMA
from neardup.index.state.groups import GroupMembers, Winners
from neardup.index.state.pages import PageTable

URLS = [f"http://h/{i}" for i in range(8)]

ops = st.lists(
    st.tuples(
        st.sampled_from(["add", "discard", "set", "pop"]),
        st.integers(0, 5),
        st.lists(st.sampled_from(URLS), max_size=3),
    ),
    max_size=60,
)


@given(st.lists(st.integers(-1, 4), min_size=len(URLS), max_size=len(URLS)), ops)
def test_group_members_equal_a_dict_of_sets(opened, seq):
    pages = PageTable(4, 1)
    want: dict[int, set[str]] = {}
    for url, gid in zip(URLS, opened, strict=True):
        pages.add(url).group_id = None if gid < 0 else gid
        if gid >= 0:
            want.setdefault(gid, set()).add(url)
    got = GroupMembers(pages)
    for op, gid, urls in seq:
        _apply_op(got, want, op, gid, urls)
        _assert_groups(got, want, range(6))


def _apply_op(got: GroupMembers, want: dict[int, set[str]], op: str, gid: int, urls: list) -> None:
    """One change of `ops` made to the groups and to the dict of sets beside them."""
    if op == "add" and urls:
        got.add(gid, urls[0])
        want.setdefault(gid, set()).add(urls[0])
    elif op == "discard" and urls:
        got.discard(gid, urls[0])
        want.get(gid, set()).discard(urls[0])
    elif op == "set":
        got[gid] = urls
        want[gid] = set(urls)
    elif op == "pop":
        assert set(got.pop(gid, ()) or ()) == want.pop(gid, set())


def _assert_groups(got: GroupMembers, want: dict[int, set[str]], gids: range) -> None:
    """The groups answer as the dict of sets does (its empty sets are no group)."""
    live = {g: m for g, m in want.items() if m}
    assert {g: set(m) for g, m in got.items()} == live
    assert sorted(got.keys()) == sorted(live)
    assert len(got) == len(live)
    assert got.count(2) == sum(1 for m in live.values() if len(m) >= 2)
    for g in gids:
        assert (g in got) == (g in live)
        assert set(got.members(g)) == live.get(g, set())
        assert got.size(g) == len(live.get(g, ()))
        assert (got.get(g) is None) == (g not in live)


def _group_rows(winners: dict[int, str]) -> pa.Table:
    """Group rows as a segment holds them, one per group, with its winner."""
    return pa.table(
        {
            "group_id": list(winners),
            "winner_url": list(winners.values()),
            "size": [1] * len(winners),
            "failed": [0] * len(winners),
        },
        schema=GROUP_SCHEMA,
    )


def _index_groups(store, texts: list[str]) -> tuple[dict, dict]:
    """Batches that add, rewrite and remove pages; the groups and winners after them."""
    from neardup.service import PageUpdate, ServiceIndex

    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate(f"http://x/{i}", text=t) for i, t in enumerate(texts[:60])])
        ix.apply([PageUpdate(f"http://y/{i}", text=texts[i]) for i in range(0, 60, 4)])
        ix.apply([PageUpdate(f"http://x/{i}", remove=True) for i in range(0, 60, 7)])
        ix.apply([PageUpdate(f"http://x/{i}", text=texts[i + 30]) for i in range(0, 30, 3)])
        ix.apply([PageUpdate(f"http://z/{i}", text=t) for i, t in enumerate(texts[60:])])
        groups = {g: frozenset(m) for g, m in ix.groups.items()}
        winners = {g: ix.winners.get(g) for g in groups}
        assert ix.consistency_errors() == []
    return groups, winners


def test_groups_folded_after_every_batch_are_the_groups_kept_in_the_overlay(tmp_path, monkeypatch):
    """`fold_if_due` folds the overlay into the arrays (from the page table's `group` column,
    the winners by one sort): forced after every batch, the groups and winners are those of
    an index that never folds, and reopened from the files they are the same."""
    from neardup.index.state import groups as members_module
    from neardup.service import ServiceIndex

    texts = near_copies(100, 7, vocab=500, words=100, bases=5, edits=6)
    kept = _index_groups(tmp_path / "kept", texts)
    monkeypatch.setattr(members_module, "FOLD_AT_LEAST", 0)
    monkeypatch.setattr(members_module, "FOLD_SHARE", 10**9)
    folded = _index_groups(tmp_path / "folded", texts)
    assert folded == kept
    assert any(len(m) > 1 for m in kept[0].values())  # groups of several pages, not only one
    with ServiceIndex(tmp_path / "folded", read_only=True) as ix:
        assert {g: frozenset(m) for g, m in ix.groups.items()} == kept[0]


@pytest.mark.parametrize("fold", [False, True])
@given(
    st.dictionaries(st.integers(0, 9), st.sampled_from(URLS), max_size=8),
    st.lists(st.tuples(st.booleans(), st.integers(0, 12), st.sampled_from(URLS)), max_size=30),
)
def test_winners_equal_a_dict(fold, opened, seq):
    """Elections and deletions over the winners as opened (rows in any group order, in two
    chunks, as several segments give them), folded into the arrays every third change
    (`fold_if_due`) or never."""
    from unittest import mock

    from neardup.index.state import groups as members_module

    rows = _group_rows(opened)
    half = rows.num_rows // 2
    rows = pa.concat_tables([rows.slice(0, half), rows.slice(half)])
    got, want = Winners(rows), dict(opened)
    with mock.patch.object(members_module, "FOLD_AT_LEAST", 0 if fold else 10**9):
        for i, (elect, gid, url) in enumerate(seq):
            if elect:
                got[gid] = url
                want[gid] = url
            else:
                assert got.pop(gid, None) == want.pop(gid, None)
            if i % 3 == 0:
                got.fold_if_due()
            for g in range(13):
                assert got.get(g) == want.get(g)


@settings(deadline=None)
@given(
    st.lists(st.integers(-1, 5), min_size=len(URLS), max_size=len(URLS)),
    st.lists(st.integers(-1, 6), min_size=len(URLS) + 4, max_size=len(URLS) + 4),
    st.sets(st.integers(0, len(URLS) + 3)),
    st.booleans(),
)
def test_moves_on_opening_are_the_moves_a_page_at_a_time(saved, now, rows, touched):
    """The pages written since a save put into its groups at once (`move`, as an opening
    does) make the groups that moving each page out of its old group and into its new one
    makes (`_move_each`, which a changed overlay still takes): pages that left a group, that
    joined one, new pages (slots past the saved ones), groups left empty. With `touched`, a
    batch changed a group before (an overlay): the same."""
    import numpy as np

    pages = PageTable(4, 1)
    for url, gid in zip(URLS, saved, strict=True):
        pages.add(url).group_id = None if gid < 0 else gid
    for i in range(len(URLS), len(now)):  # pages added since the save
        pages.add(f"http://new/{i}")
    arrays = GroupMembers(pages)
    opened = {
        "group_gid": arrays._gid,
        "group_slot": arrays._slot,
        "group_ids": arrays._ids,
        "group_sizes": arrays._sizes,
    }
    slots = np.array(sorted(rows), np.int64)
    before = np.array([saved[s] if s < len(URLS) else -1 for s in slots.tolist()], np.int64)
    for s in slots.tolist():  # the rows written since: the page table's groups now
        pages.group[s] = now[s]
    at_once, each = GroupMembers(pages, opened), GroupMembers(pages, opened)
    if touched:
        for g in (at_once, each):
            g.add(5, URLS[0])
    at_once.move(slots, before)
    changed = before != pages.group[slots]
    each._move_each(slots[changed], before[changed], pages.group[slots][changed])
    at_once.fold_if_due()
    each.fold_if_due()
    want = {g: set(m) for g, m in each.items()}
    assert {g: set(m) for g, m in at_once.items()} == want
    for g in range(-1, 8):
        assert set(at_once.members(g)) == set(each.members(g))
        assert at_once.size(g) == each.size(g)
    assert len(at_once) == len(each)
    if not touched:  # and the groups are the page table's
        col = pages.group[: pages.n].tolist()
        by_table = {g: {pages.url_at(s) for s, c in enumerate(col) if c == g} for g in set(col)}
        assert want == {g: m for g, m in by_table.items() if g >= 0}


@settings(deadline=None, max_examples=60)
@given(
    st.dictionaries(st.integers(0, 9), st.sampled_from(URLS), max_size=8),
    st.lists(st.tuples(st.integers(0, 12), st.none() | st.sampled_from(URLS)), max_size=12),
    st.lists(st.tuples(st.booleans(), st.integers(0, 12), st.sampled_from(URLS)), max_size=12),
    st.sampled_from(["save", "fold", "none"]),
)
def test_winners_opened_from_a_save_with_rows_since_equal_a_dict(
    tmp_path_factory, saved, since, seq, end
):
    """Winners mapped from a save (`saved_arrays`, written and read as an opening maps
    them) with the group rows written since taken in as a level of their own (several
    rows of a group: its last holds; a null winner: the group was deleted), then batches'
    elections and deletions, then folded, or saved and opened again: a dict's answers."""
    from neardup.index.files.saves import read_arrays, write_arrays
    from neardup.index.state.groups import GROUP_ARRAYS

    folder = tmp_path_factory.mktemp("w")
    write_arrays(folder, "g", Winners(_group_rows(saved)).saved_arrays())
    mapped = read_arrays(folder, "g", tuple(k for k in GROUP_ARRAYS if k.startswith("winner")))
    rows = pa.table(
        {
            "group_id": [g for g, _ in since],
            "winner_url": [u for _, u in since],
            "size": [1] * len(since),
            "failed": [0] * len(since),
        },
        schema=GROUP_SCHEMA,
    )
    got, want = Winners(rows, mapped), dict(saved)
    for gid, url in since:
        if url is None:
            want.pop(gid, None)
        else:
            want[gid] = url
    assert [got.get(g) for g in range(13)] == [want.get(g) for g in range(13)]
    for elect, gid, url in seq:
        if elect:
            got[gid], want[gid] = url, url
        else:
            assert got.pop(gid, None) == want.pop(gid, None)
    if end == "fold":
        got.fold()
    elif end == "save":
        write_arrays(folder, "h", got.saved_arrays())
        names = tuple(k for k in GROUP_ARRAYS if k.startswith("winner"))
        got = Winners(rows.slice(0, 0), read_arrays(folder, "h", names))
    assert [got.get(g) for g in range(13)] == [want.get(g) for g in range(13)]


@settings(deadline=None, max_examples=80)
@given(
    st.lists(st.integers(-1, 5), min_size=len(URLS), max_size=len(URLS)),
    st.lists(st.integers(-1, 6), min_size=len(URLS), max_size=len(URLS)),
    st.sets(st.integers(0, len(URLS) - 1)),
    ops,
)
def test_groups_changed_since_the_save_as_a_level_then_by_batches_equal_a_dict_of_sets(
    saved, now, rows, seq
):
    """The groups an opening finds changed since the save (`move`: a level of slots), then
    changed by batches (the overlay over it), with the save's own counts of groups of one
    and of two pages or more: a dict of sets' answers, counts included."""
    import numpy as np

    pages = PageTable(4, 1)
    for url, gid in zip(URLS, saved, strict=True):
        pages.add(url).group_id = None if gid < 0 else gid
    arrays = GroupMembers(pages)
    opened = {
        "group_gid": arrays._gid,
        "group_slot": arrays._slot,
        "group_ids": arrays._ids,
        "group_sizes": arrays._sizes,
    }
    counts = (arrays.count(1), arrays.count(2))
    slots = np.array(sorted(rows), np.int64)
    before = np.array([saved[s] for s in slots.tolist()], np.int64)
    for s in slots.tolist():
        pages.group[s] = now[s]
    got = GroupMembers(pages, opened, counts)
    got.move(slots, before)
    want: dict[int, set[str]] = {}
    for s, g in enumerate(pages.group[: pages.n].tolist()):
        if g >= 0:
            want.setdefault(g, set()).add(URLS[s])
    for i, (op, gid, urls) in enumerate([("none", 0, []), *seq]):
        _apply_op(got, want, op, gid, urls)
        if i % 4 == 3:
            got.freeze()
        _assert_groups(got, want, range(7))
