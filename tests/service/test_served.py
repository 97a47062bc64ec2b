"""The server's two copies (`service/served.py`): after any sequence of batches (adds,
changes, removals, redirects, a refused batch), the copy that follows holds what the
writer's copy holds, page for page, and both are what a fresh opening of the committed
files holds (the reference neither copy computed)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from update_ops import N_URLS, op, texts, url

import neardup.index.index_saves as index_saves_module
from neardup.config import Settings
from neardup.service import PageUpdate, ServiceError, ServiceIndex
from neardup.service.served import Served


def _everything(ix: ServiceIndex) -> dict[str, object]:
    return {
        "status": {u: ix.status(u) for u in sorted(ix.pages)},
        "groups": sorted(sorted(m) for m in ix.groups.values() if m),
        "counts": ix.counts(),
        "next_group": ix.next_group,
    }


self_redirect = st.tuples(st.just("self"), st.integers(0, N_URLS - 1), st.just(0))


@pytest.mark.parametrize("saved", [False, True])
@settings(
    max_examples=6,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    batches=st.lists(
        st.lists(st.one_of(op, self_redirect), min_size=1, max_size=10), min_size=2, max_size=6
    )
)
def test_the_reading_copy_follows_the_writer_batch_for_batch(
    saved, batches, tmp_path_factory, monkeypatch
):
    if saved:  # the graph saved after every batch: the reading copy maps each save too
        monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_PAGES", 0)
        monkeypatch.setattr(index_saves_module, "GRAPH_EVERY_SHARE", 10**9)
    pool = texts()
    store = tmp_path_factory.mktemp("served") / "s"
    ServiceIndex(store, Settings(max_bucket_pairs=2)).close()
    served = Served(ServiceIndex(store))
    reader, writer = served._copies
    try:
        assert reader is not writer and reader.writer is None
        for batch in batches:
            updates = []
            for kind, i, j in batch:
                if kind == "put":
                    updates.append(PageUpdate(url(i), text=pool[j]))
                elif kind == "remove":
                    updates.append(PageUpdate(url(i), remove=True))
                elif kind == "redirect" and i != j:
                    updates.append(PageUpdate(url(i), redirect_to=url(j)))
                elif kind == "self":
                    updates.append(PageUpdate(url(i), redirect_to=url(i)))
            if not updates:
                continue
            last = {u.url: u for u in updates}  # for a URL given twice, the last wins
            refused = any(u.redirect_to == u.url for u in last.values())
            try:
                served.apply(updates)
            except ServiceError:
                assert refused
            else:
                assert not refused
            assert _everything(reader) == _everything(writer)
            if saved and writer.graph_meta is not None:
                assert reader.graph_meta == writer.graph_meta
            assert served.read(lambda copy: copy is reader)  # reads are on the follower
        with ServiceIndex(store, read_only=True) as fresh:
            assert _everything(fresh) == _everything(reader)
    finally:
        served.close()


def test_a_batch_that_fails_after_its_commit_leaves_both_copies_at_the_commit(
    tmp_path, monkeypatch
):
    """The writer's copy committed the batch, then the files failed (a merge, a save of the
    graph): the reading copy reads the commit from the files, so neither is left behind."""
    pool = texts()
    served = Served(ServiceIndex(tmp_path / "s"))
    reader, writer = served._copies
    try:
        served.apply([PageUpdate(url(i), text=pool[i]) for i in range(6)])

        def full_disk(self):
            raise OSError("no space left on device")

        monkeypatch.setattr(ServiceIndex, "_merge_due", full_disk)
        with pytest.raises(OSError, match="no space"):
            served.apply([PageUpdate(url(i), text=pool[i + 8]) for i in range(4, 10)])
        monkeypatch.undo()
        with ServiceIndex(tmp_path / "s", read_only=True) as fresh:
            assert _everything(fresh) == _everything(writer) == _everything(reader)
            assert fresh.pages.get(url(9)) is not None  # the batch was committed
        served.apply([PageUpdate(url(11), text=pool[20])])  # and the pair goes on
        assert _everything(reader) == _everything(writer)
    finally:
        served.close()
