"""A save's sorted arrays merged block by block (`state/merged_runs.py`), and the saves that
use them: the page keys, the groups and the winners written from the saved arrays and the
changes since, with nothing folded in memory.

The references are plain Python: a list of (key, value) entries filtered and sorted for the
merge; for the saves, what the index answered before the save (its groups, winners and the
slot of every URL) and the groups made from the page table's `group` column with a
`Counter` and `sorted`.
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from neardup.index.files.saves import read_arrays
from neardup.index.service_index import ServiceIndex
from neardup.index.state import groups as groups_module
from neardup.index.state.arrays import mapped_strings, strings_in_blocks
from neardup.index.state.groups import GROUP_ARRAYS
from neardup.index.state.merged_runs import merged_blocks, merged_rows
from neardup.index.state.pages import PAGE_ARRAYS
from neardup.index.state.updates import PageUpdate
from neardup.store.file_vectors import FileVector, whole

keys = st.lists(st.integers(-5, 40), max_size=60)


@settings(max_examples=200, deadline=None)
@given(keys, keys, st.lists(st.integers(-5, 40), max_size=20), st.integers(1, 9))
def test_a_merge_in_blocks_is_the_plain_merge(base_keys, new_keys, drop, block):
    base_keys, new_keys = sorted(base_keys), sorted(new_keys)
    drop_set = set(drop)
    base = [np.array(base_keys, np.int64), np.arange(len(base_keys), dtype=np.int64)]
    new = [np.array(new_keys, np.int64), 1000 + np.arange(len(new_keys), dtype=np.int64)]
    dropped = np.array(sorted(drop_set), np.int64)
    # The plain merge: the kept base entries, then the new ones, sorted by key (stable: the
    # base's first among equal keys).
    entries = [(k, v) for v, k in enumerate(base_keys) if k not in drop_set]
    entries += [(k, 1000 + i) for i, k in enumerate(new_keys)]
    want = sorted(entries, key=lambda e: e[0])
    blocks = list(merged_blocks(base, new, dropped, block))
    got = [(k, v) for b in blocks for k, v in zip(b[0].tolist(), b[1].tolist(), strict=True)]
    assert got == want
    full = [b for b in blocks if b[0].size]  # (a block may lose every entry)
    ends = [(a[0][-1], b[0][0]) for a, b in pairwise(full)]  # a key's in one block
    assert all(x < y for x, y in ends)
    rows = merged_rows({"k": np.int64, "v": np.int32}, base, new, dropped, block)
    assert rows.specs["k"] == ((len(want),), np.int64)
    assert [v for b in rows.blocks for v in b[1].tolist()] == [v for _, v in want]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.lists(st.text(max_size=8), max_size=6), max_size=6))
def test_strings_written_in_blocks_read_back(blocks):
    every = [s for b in blocks for s in b]
    rows = strings_in_blocks("x", len(every), lambda: (pa.array(b, pa.string()) for b in blocks))
    files = {name: [] for name in rows.specs}
    for block in rows.blocks:
        for name, part in zip(rows.specs, block, strict=True):
            files[name].append(part)
    offsets, data = (np.concatenate(files[name]) for name in rows.specs)
    assert [offsets.shape, data.shape] == [shape for shape, _ in rows.specs.values()]
    assert mapped_strings(offsets, data).to_pylist() == every


WORDS = [f"w{i}" for i in range(400)]


def _text(doc: int) -> str:
    """A page of 60 words; docs 3 apart share most of them (near-duplicates)."""
    return " ".join(WORDS[doc : doc + 60])


def _answers(ix: ServiceIndex) -> tuple[dict, dict, dict]:
    groups = {gid: frozenset(m) for gid, m in ix.groups.items()}
    winners = {gid: ix.winners.get(gid) for gid in groups}
    slots = {u: ix.pages.slot(u) for u in ix.pages}
    return groups, winners, slots


def test_a_save_merges_the_changes_into_the_saved_arrays(tmp_path, monkeypatch):
    monkeypatch.setattr(groups_module, "FOLD_AT_LEAST", 10**9)  # nothing folds but the save
    store = tmp_path / "s"
    with ServiceIndex(store) as ix:
        ix.apply([PageUpdate(f"http://a.example/{i}", text=_text(i)) for i in range(60)])
        ix._save_graph_now()
        # Changes after the save: new pages (some joining saved groups), pages whose text
        # changes group, removals, redirects and in-links.
        ix.apply([PageUpdate(f"http://b.example/{i}", text=_text(i + 1)) for i in range(0, 60, 4)])
        ix.apply([PageUpdate(f"http://a.example/{i}", text=_text(300 - i)) for i in range(5)])
        ix.apply([PageUpdate(f"http://a.example/{i}", remove=True) for i in range(50, 56)])
        ix.apply([PageUpdate(f"http://a.example/{i}", links_in=i) for i in range(20, 40)])
        ix.apply([PageUpdate("http://c.example/r", redirect_to="http://a.example/30")])
        assert ix.groups._over and ix.winners._over and ix.pages._added  # not folded
        want = _answers(ix)
        n = ix.pages.n
        column = np.asarray(ix.pages.group[:n])
        ix._save_graph_now()
        assert _answers(ix) == want  # the state mapped from the new save
        saved = ix.store / str(ix.graph_meta["name"])
    # The saved arrays against the page table's `group` column, made here.
    a = read_arrays(saved.parent, saved.name, GROUP_ARRAYS + PAGE_ARRAYS)
    a = {k: whole(v) if isinstance(v, FileVector) else v for k, v in a.items()}  # (by blocks)
    pairs = sorted((int(g), s) for s, g in enumerate(column.tolist()) if g >= 0)
    assert list(zip(a["group_gid"].tolist(), a["group_slot"].tolist(), strict=True)) == pairs
    sizes = Counter(g for g, _ in pairs)
    assert dict(zip(a["group_ids"].tolist(), a["group_sizes"].tolist(), strict=True)) == sizes
    assert a["group_ids"].tolist() == sorted(sizes)
    assert np.all(np.diff(a["page_skeys"]) >= 0)
    assert sorted(a["page_sslots"].tolist()) == list(range(n))
    urls = mapped_strings(a["page_url_offsets"], a["page_url_bytes"]).to_pylist()
    assert dict(zip(urls, range(n), strict=True)) == want[2]
    winners = mapped_strings(a["winner_url_offsets"], a["winner_url_bytes"])
    got = {
        g: winners[int(r)].as_py() for g, r in zip(a["winner_gid"], a["winner_row"], strict=True)
    }
    assert {g: w for g, w in got.items() if g in want[0]} == want[1]
    with ServiceIndex(store, read_only=True) as ix:
        assert _answers(ix) == want
    # The groups counted as the save wrote them (`group_counts`), then after changes (the
    # overlay's groups against their saved sizes), against the group column counted here.
    with ServiceIndex(store) as ix:
        assert ix.graph_meta["group_counts"] == _counted(ix, 1) + _counted(ix, 2)
        ix.apply([PageUpdate(f"http://a.example/{i}", text=_text(200 + i)) for i in range(6)])
        ix.apply([PageUpdate(f"http://d.example/{i}", text=_text(i)) for i in range(0, 40, 3)])
        ix.apply([PageUpdate(f"http://a.example/{i}", remove=True) for i in range(10, 20)])
        assert ix.groups._over and ix.groups._counts is not None
        assert [ix.groups.count(1), ix.groups.count(2)] == _counted(ix, 1) + _counted(ix, 2)


def _counted(ix: ServiceIndex, at_least: int) -> list[int]:
    """The groups of at least `at_least` live pages, from the page table's group column."""
    n = ix.pages.n
    live = np.asarray(ix.pages.group[:n])[~np.asarray(ix.pages.removed[:n], bool)]
    sizes = Counter(live[live >= 0].tolist())
    return [sum(1 for c in sizes.values() if c >= at_least)]
