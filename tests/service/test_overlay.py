"""The one overlay helper: when an overlay is folded, and an entry's life through a batch."""

from __future__ import annotations

import numpy as np

from neardup.index.state.overlay import FoldRule, Overlay


def test_a_fold_is_due_past_an_eighth_of_the_base_and_past_the_floor():
    rule = FoldRule(at_least=10)
    assert not rule.due(10, 0)  # not past the floor, whatever the base
    assert rule.due(11, 87)  # 88 > 87
    assert not rule.due(11, 88)  # an eighth exactly is not more than an eighth
    assert FoldRule(0, share=2).due(3, 5)
    assert not FoldRule(0, share=2).due(3, 6)


def test_the_fold_rule_is_the_graph_saves_max_of_floor_and_share():
    # index.py saved the graph once `tail > max(pages, n // share)`: the same answers.
    for tail in range(0, 60):
        for n in range(0, 300, 7):
            assert FoldRule(16, 8).due(tail, n) == (tail > max(16, n // 8))


def test_an_entry_is_a_set_while_a_batch_changes_it_then_a_tuple():
    over: Overlay[int, str] = Overlay()
    base = {1: ["a", "b"]}
    got = over.mutable(1, lambda: base[1])
    got.add("c")
    assert over.mutable(1, lambda: []) is got  # the same set until the batch is done
    over.freeze()
    assert isinstance(over[1], tuple) and set(over[1]) == {"a", "b", "c"}
    # A frozen entry is changed from its own members, never the base's again.
    over.mutable(1, lambda: ["x"]).discard("a")
    over.freeze()
    assert set(over[1]) == {"b", "c"}


def test_thawed_and_new_entries_are_frozen_by_the_next_freeze():
    over: Overlay[int, int] = Overlay([(5, (1, 2))])
    over.thaw([5, 6])  # 6 is not in the overlay: left to the base
    assert over[5] == {1, 2} and 6 not in over
    over.set_members(6, [3])
    over.freeze()
    assert over == {5: (1, 2), 6: (3,)}
    assert sorted(over.keys_array().tolist()) == [5, 6]
    assert over.keys_array().dtype == np.int64
