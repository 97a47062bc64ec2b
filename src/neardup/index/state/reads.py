"""The reads of an open index: a URL's status, a group, the check of a text, the counts.

Why here, as functions of the state (`IndexState`), and not methods of `ServiceIndex`: a
read needs the pages, groups, winners and graph in memory and nothing of the files or the
locks, so the index class keeps only its locking around them, and a reader sees every
answer the API gives in one module. The answers are the frozen records of
`read_records.py`, whose fields the API's response models (`service/api_models.py`)
declare.
"""

from __future__ import annotations

import numpy as np

from neardup.index.state.index_state import IndexState
from neardup.index.state.prepare import PageSketch
from neardup.index.state.read_records import (
    CheckMatch,
    CheckResult,
    GroupMember,
    GroupView,
    IndexCounts,
    UrlStatus,
)
from neardup.ingest.eligibility import enough_words


def status(st: IndexState, url: str) -> UrlStatus | None:
    """Group, winner and duplicate status of a stored URL (following redirects)."""
    p = st.pages.get(url)
    if p is None:
        return None
    final, chain = st.resolve(url)
    fp = st.pages.get(final)
    if p.removed or fp is None or fp.removed or fp.group_id is None:
        return UrlStatus(url, p.removed, tuple(chain[1:]), final, None, None, False, False, None)
    gid = fp.group_id
    winner = st.winners.get(gid)
    # A redirect is a duplicate of what it leads to; a loser only once verified.
    duplicate = bool(len(chain) > 1 or (final != winner and fp.verified))
    return UrlStatus(
        url=url,
        removed=p.removed,
        redirect_chain=tuple(chain[1:]),
        final_url=final,
        group_id=gid,
        winner_url=winner,
        is_duplicate=duplicate,
        verified=fp.verified,
        resemblance=resemblance_to_winner(st, fp.signature, gid),
    )


def group(st: IndexState, gid: int) -> GroupView | None:
    """A group's members (the winner first) and the redirects into it."""
    members = st.groups.get(gid)
    if not members:
        return None
    winner = st.winners[gid]
    rows = []
    for url in sorted(members, key=lambda u: (u != winner, u)):
        p = st.pages[url]
        sim = resemblance_to_winner(st, p.signature, gid) or 0.0
        rows.append(
            GroupMember(url, url == winner, p.verified, sim, p.links_in, st.popularity(url))
        )
    redirects = sorted(
        {u for m in members for u in st.redirects.upstream(m) if st.resolve(u)[0] in members}
    )
    return GroupView(gid, winner, len(members), tuple(rows), tuple(redirects))


def resemblance_to_winner(st: IndexState, signature: np.ndarray | None, gid: int) -> float | None:
    """Estimated resemblance of a sketch to group `gid`'s winner (the share of equal
    min-hash values), the one measure behind `status`, `check` and `group`; None when
    either side has no sketch."""
    winner = st.winners.get(gid)
    wp = st.pages.get(winner) if winner is not None else None
    if signature is None or wp is None or wp.signature is None:
        return None
    return float((signature == wp.signature).mean())


def matches(st: IndexState, sk: PageSketch) -> CheckResult:
    """Which stored group a sketch would join, without adding it (a tier-2 lookup), and its
    resemblance to that group's winner (`ServiceIndex.check`, under its lock)."""
    found = [CheckMatch(url, st.pages[url].group_id, sim) for url, sim in neighbours(st, sk)]
    found.sort(key=lambda m: (-m.resemblance, m.url))
    gid = found[0].group_id if found else None
    return CheckResult(
        is_duplicate=bool(found),
        group_id=gid,
        winner_url=st.winners.get(gid) if gid is not None else None,
        resemblance=resemblance_to_winner(st, sk.signature, gid) if gid is not None else None,
        matches=tuple(found[:10]),
        length=sk.n_tokens,
    )


def neighbours(st: IndexState, sk: PageSketch) -> list[tuple[str, float]]:
    """Stored pages resembling a sketch by at least τ, with the resemblance: through the
    scan's band index ("bands") or tier 2's row store ("lengths", "lsh")."""
    if not enough_words(sk.n_tokens, sk.n_shingles, st.settings.min_tokens):
        return []  # a text the scan would not compare (no shingle, too few words)
    if st.options.tier2 == "bands":
        url = st.pages.url_at
        return [(url(s), sim) for s, sim in st.scan_graph.similar(sk.signature)]
    found = st.store_rows.many_to_all(sk.signature[None, :], sk.lengths[None, :])
    out = []
    for row, sim in zip(found.row.tolist(), found.resemblance.tolist(), strict=True):
        url = st.store_rows.urls[row]
        assert url is not None
        out.append((url, sim))
    return out


def counts(st: IndexState) -> IndexCounts:
    """Live pages, redirects, groups and groups of more than one page."""
    live, redirects = st.pages.counts()
    return IndexCounts(live, redirects, len(st.groups), st.groups.count(2))
