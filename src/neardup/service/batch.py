"""One update batch, computed in memory: update cases, tier 1, tier 2, regrouping.

The functions change the in-memory copy of the index they are given (`ix`) and say which
rows changed; `ServiceIndex.apply` writes those rows in one transaction and reloads on
failure, so nothing here touches the database. Kept out of `index.py` because this is the
paper's algorithm, while the index class is its persistent state and its reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from neardup.kernels import fingerprint64, sketch_text
from neardup.service.groups import _UnionFind, partition_group, settle_component
from neardup.service.lengths import dim_lengths
from neardup.service.storage import _Page
from neardup.service.updates import BatchReport, PageUpdate, ServiceError, html_to_text

if TYPE_CHECKING:
    from neardup.service.index import ServiceIndex


def compute_batch(
    ix: ServiceIndex, batch: dict[str, PageUpdate]
) -> tuple[BatchReport, set[str], set[int], set[int]]:
    """The batch in memory: update cases, tier 1, tier 2, then re-settle touched groups.
    Returns the report, the page rows and groups to rewrite, and the groups to delete."""
    rep = BatchReport(pages=len(batch))
    dirty: set[str] = set()
    affected: set[int] = set()  # lost a member: connectivity must be re-checked
    touched: set[int] = set()  # gained members or changed inside: winner re-elected
    tier2: list[str] = []
    # Pages whose popularity may have moved with a redirect: their groups re-elect.
    pop_targets: set[str] = set()
    redirected: list[str] = []
    tau = ix.threshold
    for url, u in batch.items():
        old = ix.pages.get(url)
        p = old if old is not None else _Page(url)
        ix.pages[url] = p
        dirty.add(url)
        if p.redirect_to and not p.removed:
            pop_targets.add(ix.resolve(url)[0])  # loses (or changes) this credit
        if u.links_in is not None:
            if u.links_in < 0:
                raise ServiceError(f"links_in must be >= 0 for {url}")
            p.links_in = int(u.links_in)
            if p.group_id is not None:
                touched.add(p.group_id)
        if u.remove:
            if old is not None and not old.removed:
                rep.removed += 1
            _detach(ix, p, affected)
            ix._set_signature(p, None, 0)
            ix._set_redirect(p, None)
            p.removed = True
            continue
        was_live = old is not None and not old.removed
        p.removed = False
        if u.redirect_to:
            if u.redirect_to == url:
                raise ServiceError(f"{url} redirects to itself")
            rep.redirects += 1
            _detach(ix, p, affected)
            ix._set_signature(p, None, 0)
            ix._set_redirect(p, u.redirect_to)
            redirected.append(url)
            continue
        if p.redirect_to and u.links_in is not None and u.text is None and u.html is None:
            redirected.append(url)  # a redirect's popularity update: credit its target
            continue
        if u.text is not None:
            text = u.text
        elif u.html is not None:
            text = html_to_text(u.html, url)
        else:
            if was_live and u.links_in is not None:
                continue  # a popularity update only
            raise ServiceError(f"{url}: give text, html, redirect_to or remove")
        ix._set_redirect(p, None)
        sk = sketch_text(text, ix.settings)
        sig, length = sk.minhash, int(sk.shingles.size)
        lens = dim_lengths([text], ix.options.dims, ix.settings.seed)[0]
        p.exact_fp = fingerprint64(text.encode("utf-8", "surrogatepass"))
        if was_live:
            rep.changed += 1
        else:
            rep.new += 1
        gid = p.group_id
        if gid is not None and p.signature is not None and length:
            winner = ix.winners.get(gid)
            wsig = p.signature if winner == url else ix.pages[winner].signature
            rep.comparisons += 1
            if wsig is not None and float((sig == wsig).mean()) >= tau:
                rep.tier1 += 1
                ix._set_signature(p, sig, length, lens)
                touched.add(gid)
                continue
        _detach(ix, p, affected)
        ix._set_signature(p, sig, length, lens)
        tier2.append(url)
    rep.tier2 = len(tier2)
    _merge_tier2(ix, tier2, rep, touched, dirty)
    pop_targets.update(ix.resolve(url)[0] for url in redirected)
    for target in pop_targets:
        tp = ix.pages.get(target)
        if tp is not None and tp.group_id is not None:
            touched.add(tp.group_id)
    for gid in list(affected):
        if gid in ix.groups and not ix.groups[gid]:
            del ix.groups[gid]
            ix.winners.pop(gid, None)
    dropped: set[int] = set(affected | touched)
    for gid in sorted(affected | touched):
        if gid in ix.groups:
            rep.repaired += _settle(ix, gid, gid in affected, dirty, dropped)
    # A group that lost members or holds losers failing against the winner may no longer
    # be what a full recomputation would make of its component: re-cluster the component.
    suspects = {
        g
        for g in dropped
        if g in ix.groups and (g in affected or any(not ix.pages[u].verified for u in ix.groups[g]))
    }
    if suspects:
        rep.recomputed += _recompute_components(ix, suspects, dirty, dropped)
    rep.groups_touched = len(affected | touched)
    return rep, dirty, {g for g in dropped if g in ix.groups}, dropped


def _detach(ix: ServiceIndex, p: _Page, affected: set[int]) -> None:
    if p.group_id is not None:
        members = ix.groups.get(p.group_id)
        if members is not None:
            members.discard(p.url)
            affected.add(p.group_id)
        p.group_id = None
    p.verified = False


def _merge_tier2(
    ix: ServiceIndex, urls: list[str], rep: BatchReport, touched: set[int], dirty: set[str]
) -> None:
    """Many-to-all: the batch's tier-2 pages against the whole index (stored pages and
    the batch itself, already in the row store) in one compiled call, then merge what
    was matched. Pages without shingles are not queried and found nothing."""
    uf = _UnionFind()
    for url in urls:
        uf.find(url)
    st = ix.store_rows
    queries = [u for u in urls if u in st.row_of]
    if queries:
        rows = np.array([st.row_of[u] for u in queries], dtype=np.int64)
        found = st.many_to_all(st.sigs[rows], st.lens[rows], rows)
        rep.comparisons += found.comparisons
        rep.tier2_comparisons += found.comparisons
        rep.tier2_all_pairs += len(queries) * (len(st) - 1)
        for qi, row in zip(found.query.tolist(), found.row.tolist(), strict=True):
            other = st.urls[row]
            assert other is not None
            uf.union(queries[qi], other)
    comps: dict[str, list[str]] = {}
    for url in urls:
        comps.setdefault(uf.find(url), []).append(url)
    batch_set = set(urls)
    matched: dict[str, list[str]] = {}
    for node in list(uf.parent):
        if node not in batch_set:
            matched.setdefault(uf.find(node), []).append(node)
    for root, members in comps.items():
        others = matched.get(root, [])
        gids = sorted(
            {ix.pages[m].group_id for m in others if ix.pages[m].group_id is not None},
            key=lambda g: (-len(ix.groups[g]), g),
        )
        target = gids[0] if gids else ix._new_group()
        ix.groups.setdefault(target, set())
        for g in gids[1:]:  # transitive: the page bridges groups, so they merge
            for m in ix.groups.pop(g):
                ix.pages[m].group_id = target
                dirty.add(m)  # its stored row still names the merged-away group
                ix.groups[target].add(m)
            ix.winners.pop(g, None)
            touched.add(g)
        for m in members:
            ix.pages[m].group_id = target
            ix.groups[target].add(m)
        touched.add(target)


def _settle(ix: ServiceIndex, gid: int, affected: bool, dirty: set[str], dropped: set[int]) -> int:
    """Re-elect the winner, re-verify losers; re-check connectivity when a member left.
    Returns 1 when the group was repaired or split."""
    members = sorted(ix.groups[gid])
    sigs = np.stack([ix.pages[u].signature for u in members])
    links = [ix.popularity(u) for u in members]
    if affected:
        parts = partition_group(members, sigs, links, ix.threshold, ix.options)
    else:
        comp = list(range(len(members)))
        parts = settle_component(comp, members, sigs, links, ix.threshold, ix.options)
    old_winner = ix.winners.get(gid)
    parts.sort(key=lambda part: (old_winner not in [members[i] for i in part], -len(part)))
    for n, part in enumerate(parts):
        g = gid if n == 0 else ix._new_group()
        _install(ix, g, part, members, sigs, dirty, dropped)
    return int(len(parts) > 1)


def _recompute_components(
    ix: ServiceIndex, seeds: set[int], dirty: set[str], dropped: set[int]
) -> int:
    """Re-cluster, from scratch, the connected component around each seed group.

    The component is closed through tier 2: the members are compared with the index, the
    groups they match join, their members are compared in turn, until nothing new joins.
    Then `partition_group` (the rule a full recomputation applies to a component) decides
    the groups again. This is the paper's group repair ("recompute the duplicate
    membership of this group") widened to the component, because a group kept apart by
    an earlier split can be what makes a later group fail its checks. Returns the number
    of groups re-clustered.
    """
    st = ix.store_rows
    uf = _UnionFind()
    seen = {g for g in seeds if g in ix.groups}
    for g in seen:
        uf.find(g)
    frontier = sorted(u for g in seen for u in ix.groups[g])
    while frontier:  # all seeds at once: one many-to-all call per round
        queries = [u for u in frontier if u in st.row_of]
        if not queries:
            break
        rows = np.array([st.row_of[u] for u in queries], dtype=np.int64)
        found = st.many_to_all(st.sigs[rows], st.lens[rows], rows)
        new: set[int] = set()
        for qi, r in zip(found.query.tolist(), found.row.tolist(), strict=True):
            url = st.urls[r]
            g = ix.pages[url].group_id if url is not None else None
            mine = ix.pages[queries[qi]].group_id
            if g is None or mine is None or g == mine:
                continue
            uf.union(mine, g)
            if g not in seen:
                seen.add(g)
                new.add(g)
        frontier = sorted(u for g in new for u in ix.groups[g])
    comps: dict[int, set[int]] = {}
    for g in sorted(seen):
        comps.setdefault(uf.find(g), set()).add(g)
    for gids in comps.values():
        _regroup(ix, gids, dirty, dropped)
    return len(seen)


def _regroup(ix: ServiceIndex, gids: set[int], dirty: set[str], dropped: set[int]) -> None:
    """Replace groups `gids` by `partition_group` of their pages; a part keeps the id of
    the old group its winner came from when that id is still free."""
    members = sorted(u for g in gids for u in ix.groups[g])
    sigs = np.stack([ix.pages[u].signature for u in members])
    links = [ix.popularity(u) for u in members]
    parts = partition_group(members, sigs, links, ix.threshold, ix.options)
    old_of = {u: ix.pages[u].group_id for u in members}
    for g in gids:
        del ix.groups[g]
        ix.winners.pop(g, None)
        dropped.add(g)
    parts.sort(key=lambda part: (-len(part), members[part[0]]))
    for part in parts:
        g = old_of[members[part[0]]]
        if g is None or g in ix.groups:
            g = ix._new_group()
        _install(ix, g, part, members, sigs, dirty, dropped)


def _install(
    ix: ServiceIndex,
    g: int,
    part: list[int],
    members: list[str],
    sigs: np.ndarray,
    dirty: set[str],
    dropped: set[int],
) -> None:
    """Make `part` (positions into `members`, winner first) group `g`: each loser is
    verified against the winner, and pages whose group or verdict changed are dirty."""
    dropped.add(g)
    urls = [members[i] for i in part]
    ix.groups[g] = set(urls)
    ix.winners[g] = urls[0]
    wsig = sigs[part[0]]
    for i, u in zip(part, urls, strict=True):
        p = ix.pages[u]
        verified = bool(i == part[0] or (sigs[i] == wsig).mean() >= ix.threshold)
        if p.group_id != g or p.verified != verified:
            dirty.add(u)
        p.group_id, p.verified = g, verified
