"""One update batch, computed in memory: update cases, the scan's graph, then groups.

The functions change the index's state in memory they are given (`ix`, a
`state.IndexState`) and say which rows changed; `ServiceIndex.apply` writes those rows in
one transaction and reloads on failure, so nothing here touches a file. Kept out of
`service_index.py` because this is the algorithm, while the index class is its persistent state
and its reads; it imports only the state, never the index.

Groups are the scan's clusters: a page whose sketch changed goes into the scan's graph
(`scangraph.ScanGraph`: classes, band index, bucket rule, verification), the components it
touched are clustered again with the scan's rule, and each resulting cluster becomes a group
whose winner is elected by Ask.com's rule (`winner_rule.elect`). A page sent again with the same
sketch is tier 1: nothing to do. A page that cannot be sketched for the scan (fewer than
`min_tokens` words, no shingle: `eligibility.enough_words`) has no cluster in the scan; here
it is a group of its own. A page the eligibility rule leaves out by its URL (a crawler file,
a URL pattern) never reaches this: `prepare_batch` counts it as skipped.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from neardup.index.state.index_state import IndexState
from neardup.index.state.lookups import HERE, BatchLookups, ScorePairs
from neardup.index.state.pages import PageRef
from neardup.index.state.prepare import PreparedBatch
from neardup.index.state.updates import BatchReport, SelfRedirect, ServiceError, UnknownPage
from neardup.index.state.winner_rule import elect
from neardup.ingest.eligibility import enough_words


def compute_batch(
    ix: IndexState, prepared: PreparedBatch, lookups: BatchLookups = HERE
) -> tuple[BatchReport, set[str], set[int], set[int]]:
    """The batch in memory: update cases, the graph, re-clustered components, winners.
    The sketches were computed before the lock (`prepare.prepare_batch`); this only looks
    up and changes state. `lookups`: what the engine found of the saved arrays elsewhere
    (the embedded engine: nothing, all read here). Returns the report, the page rows and
    groups to rewrite, and the groups to delete."""
    batch = prepared.updates
    rep = BatchReport(pages=len(batch), skipped=len(prepared.skipped))
    dirty: set[str] = set()
    touched: set[int] = set()  # groups that lost members or must elect again
    prev: dict[str, int | None] = {}  # group of each page before the batch moved it
    gone: set[int] = set()  # pages (slots) that leave the graph
    put: dict[int, int] = {}  # pages (slots) that enter it: their fingerprint, new sketches
    loose: list[str] = []  # content pages outside the graph: each a group of its own
    pop_targets: set[str] = set()  # pages whose popularity may have moved with a redirect
    redirected: list[str] = []
    verifications = ix.scan_graph.verifications
    sketches = prepared.sketches
    keys = [sk.key if (sk := sketches.get(url)) is not None else None for url in batch]
    found = ix.pages.lookup(list(batch), keys, lookups.pages)
    # What the batch reads of the saved arrays a page or a group at a time, found at once:
    # the runs of the groups its pages are in and their winners (`preload`), and the keys
    # of the nodes it removes (`signatures_changing`).
    known = np.array([s for s in found if s is not None], np.int64)
    gids = np.asarray(ix.pages.group[known]).tolist() if known.size else []
    ix.groups.preload(gids)
    ix.winners.preload(gids)
    removing = [s for u, s in zip(batch.values(), found, strict=True) if u.remove and s is not None]
    ix.scan_graph.signatures_changing(removing, lookups)
    for (url, u), slot, key in zip(batch.items(), found, keys, strict=True):
        old = None if slot is None else PageRef(ix.pages, slot)
        p = old if old is not None else ix.pages.add(url, key)
        dirty.add(url)
        prev.setdefault(url, p.group_id)
        if p.redirect_to and not p.removed:
            pop_targets.add(ix.resolve(url, lookups.pages)[0])  # loses (or changes) this credit
        if u.links_in is not None:
            if u.links_in < 0:
                raise ServiceError(f"links_in must be >= 0 for {url}")
            p.links_in = int(u.links_in)
            if p.group_id is not None:
                touched.add(p.group_id)
        if u.remove:
            if old is not None and not old.removed:
                rep.removed += 1
            _leave(ix, p, touched, gone, lookups)
            ix.set_redirect(p, None)
            p.removed = True
            continue
        was_live = old is not None and not old.removed
        p.removed = False
        if u.redirect_to:
            if u.redirect_to == url:
                raise SelfRedirect(f"{url} redirects to itself")
            rep.redirects += 1
            _leave(ix, p, touched, gone, lookups)
            ix.set_redirect(p, u.redirect_to)
            redirected.append(url)
            continue
        if p.redirect_to and u.links_in is not None and u.text is None and u.html is None:
            redirected.append(url)  # a redirect's popularity update: credit its target
            continue
        sk = prepared.sketches.get(url)
        if sk is None:
            if was_live and u.links_in is not None:
                continue  # a popularity update only
            if u.links_in is not None:
                raise UnknownPage(
                    f"{url}: not in the index, so links_in alone has no page to update; "
                    "give text, html or redirect_to to add it"
                )
            raise ServiceError(f"{url}: give text, html, redirect_to or remove")
        sig, length = sk.signature, sk.n_shingles
        p.exact_fp = sk.exact_fp
        if was_live:
            rep.changed += 1
        else:
            rep.new += 1
        eligible = bool(enough_words(sk.n_tokens, length, ix.settings.min_tokens))
        same = (
            was_live
            and not p.redirect_to
            and p.group_id is not None
            and p.signature is not None
            and p.shingle_fp == sk.shingle_fp
            and bool(enough_words(p.n_tokens, p.length, ix.settings.min_tokens)) == eligible
            and np.array_equal(p.signature, sig)
        )
        if same:
            rep.tier1 += 1  # the same sketch: the scan would see the same page
            continue
        if old is not None:  # a new page has no redirect, group, sketch or node to leave
            ix.set_redirect(p, None)
            _leave(ix, p, touched, gone, lookups)
        ix.set_signature(p, sig, length, sk.lengths, lookups)
        p.shingle_fp, p.n_tokens = sk.shingle_fp, sk.n_tokens
        if eligible:
            gone.discard(p.slot)
            put[p.slot] = sk.shingle_fp
        else:
            loose.append(url)
    rep.tier2 = len(put)
    nodes = ix.scan_graph.update(gone, put, lookups)
    comps = ix.scan_graph.components(nodes)
    url = ix.pages.url_at
    clusters = [[url(s) for s in c] for c in ix.scan_graph.cluster(comps)]
    clusters.extend([u] for u in loose)
    for cluster in clusters:
        for url in cluster:
            p = ix.pages[url]
            prev.setdefault(url, p.group_id)
            _detach(ix, p, touched)
    claimed: set[int] = set()
    for cluster in clusters:
        gid = _claim(ix, [prev.get(u) for u in cluster], claimed)
        ix.groups[gid] = set(cluster)
        dirty.update(cluster)
        for url in cluster:
            ix.pages[url].group_id = gid
        touched.add(gid)
    rep.recomputed = len(comps)
    rep.comparisons = rep.tier2_comparisons = ix.scan_graph.verifications - verifications
    pop_targets.update(ix.resolve(url, lookups.pages)[0] for url in redirected)
    for target in pop_targets:
        tp = ix.pages.get(target, lookups.pages)
        if tp is not None and tp.group_id is not None:
            touched.add(tp.group_id)
    elected: list[int] = []
    for gid in sorted(touched):
        if not ix.groups.get(gid):
            ix.groups.pop(gid, None)
            ix.winners.pop(gid, None)
            continue
        _elect(ix, gid)
        elected.append(gid)
    dirty.update(_check_against_winners(ix, elected, lookups.score))
    rep.groups_touched = len(touched)
    if len(ix.store_rows):  # the length grid (tier 2's partitions) follows the index
        ix.store_rows.fit()
    return rep, dirty, {g for g in touched if g in ix.groups}, touched


def _leave(
    ix: IndexState, p: PageRef, touched: set[int], gone: set[int], lookups: BatchLookups
) -> None:
    """The page stops being content: out of its group, the graph and tier 2's store."""
    _detach(ix, p, touched)
    ix.set_signature(p, None, 0, lookups=lookups)
    gone.add(p.slot)


def _detach(ix: IndexState, p: PageRef, touched: set[int]) -> None:
    if p.group_id is not None:
        ix.groups.discard(p.group_id, p.url)
        touched.add(p.group_id)
        p.group_id = None
    p.verified = False


def _claim(ix: IndexState, olds: list[int | None], claimed: set[int]) -> int:
    """A group id for a new cluster: the id most of its pages had, when that group has no
    other page left and no other cluster of the batch took it; else a fresh id."""
    for gid, _ in Counter(g for g in olds if g is not None).most_common():
        if gid not in claimed and not ix.groups.get(gid):
            claimed.add(gid)
            return gid
    gid = ix.new_group()
    claimed.add(gid)
    return gid


def _elect(ix: IndexState, gid: int) -> None:
    """Elect the group's winner (its members' popularity and URLs: no sketch read)."""
    members = sorted(ix.groups[gid])
    if len(members) == 1:  # most groups: the page wins alone
        winner = members[0]
    else:
        popularity = [ix.popularity(u) for u in members]
        winner = members[elect(members, popularity, ix.options.preferred_suffixes)[0]]
    ix.winners[gid] = winner


def _check_against_winners(
    ix: IndexState, gids: list[int], score: ScorePairs | None = None
) -> set[str]:
    """Verify each loser of the groups `gids` against its winner, every group's pairs
    compared at once (`PageTable.resemblance`: on a Spark add, where the saved sketches
    are); returns the pages whose row changed."""
    pages = ix.pages
    urls: list[str] = []
    group: list[int] = []
    slot: list[int] = []
    winner_slot: list[int] = []
    for gid in gids:
        members = sorted(ix.groups[gid])
        refs = [pages[url] for url in members]  # one lookup a member
        w = refs[members.index(ix.winners[gid])].slot
        for url, p in zip(members, refs, strict=True):
            urls.append(url)
            group.append(gid)
            slot.append(p.slot)
            winner_slot.append(w)
    slots, wins = np.array(slot, np.int64), np.array(winner_slot, np.int64)
    verified = slots == wins
    pair = ~verified & pages.has_sig[slots] & pages.has_sig[wins]
    if pair.any():
        verified[pair] = pages.resemblance(slots[pair], wins[pair], score) >= ix.threshold
    changed = set()
    for url, gid, s, ok in zip(urls, group, slot, verified.tolist(), strict=True):
        if pages.verified[s] != ok or pages.group[s] != gid:
            changed.add(url)
        pages.group[s], pages.verified[s] = gid, ok
    return changed
