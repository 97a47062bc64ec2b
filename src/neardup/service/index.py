"""The incremental duplicate index: pages, duplicate groups with winners, tier 1 and tier 2.

After Ask.com's incremental system (paper 004): every group of near-duplicates has one
*winner* whose signature represents the group. An updated page that still resembles its
winner stays where it is (tier 1, one comparison); anything else (new pages, pages that
drifted away) goes to tier 2, a batched many-to-all comparison against the whole index,
partitioned by the multidimensional length mapping (`tier2.SignatureStore`). Groups are kept
transitively (connected components of verified pairs); a member that leaves makes its old
group re-check its connectivity, and a group whose losers mostly fail verification against
the winner is repaired by splitting it around winners (see `partition_group`).

DuckDB holds the truth; the process holds a copy in dicts for lookups, so one update batch
is: compute in memory, rewrite the touched rows in one transaction, and on any exception
roll back and reload from the file (so memory never runs ahead of the last commit).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb
import numpy as np
import pyarrow as pa

from neardup.config import Settings, SettingsError
from neardup.ingest import RawRecord, extract_page
from neardup.kernels import SIGNATURE_DTYPE, fingerprint64, sketch_text
from neardup.kernels.tuning import recall_first_bands
from neardup.service.lengths import LengthMap, dim_lengths
from neardup.service.popularity import RedirectGraph
from neardup.service.tier2 import SignatureStore, agreement_matrix
from neardup.store.outputs import open_folder
from neardup.store.sql_files import package_sql

DB_NAME = "service.duckdb"
SERVICE_KIND = "service index"
# Test hook: seconds to sleep inside the transaction (after the pages were rewritten, before
# the group rows), printing a marker first, so a test can kill the process mid-batch.
SLEEP_HOOK = "NEARDUP_SERVICE_SLEEP_IN_TX"
TX_MARKER = "neardup-service: inside transaction"
MAX_REDIRECTS = 32


def _sql(name: str) -> str:
    return package_sql("service/sql", name)


# Each query counts the rows that break one invariant of the stored state.
_INVARIANTS: tuple[tuple[str, str], ...] = (
    ("SELECT count(*) - count(DISTINCT url) FROM pages", "duplicate page rows"),
    (
        "SELECT count(*) FROM pages p WHERE group_id IS NOT NULL AND NOT removed AND "
        "group_id NOT IN (SELECT group_id FROM groups)",
        "pages in unknown groups",
    ),
    (
        "SELECT count(*) FROM groups g WHERE winner_url NOT IN "
        "(SELECT url FROM pages WHERE group_id = g.group_id AND NOT removed)",
        "groups whose winner is not a member",
    ),
    (
        "SELECT count(*) FROM groups g WHERE size <> (SELECT count(*) FROM pages "
        "WHERE group_id = g.group_id AND NOT removed)",
        "groups with a wrong size",
    ),
    (
        "SELECT count(*) FROM pages WHERE NOT removed AND redirect_to IS NULL AND group_id IS NULL",
        "live pages without a group",
    ),
)


class ServiceError(ValueError):
    """A request the index cannot honour (bad update, unknown group)."""


@dataclass(frozen=True)
class ServiceOptions:
    """Choices of the service that do not change sketches.

    `preferred_suffixes`: host suffixes preferred as winners, best first (a market's own
    domains, e.g. (".co.uk", ".uk") for the UK market). `repair_share`: a group of at least
    `repair_min_losers` losers is repaired when more than this share of them fail
    verification against the winner (a transitive chain that drifted).

    Tier 2: `tier2` is "lengths" (the paper's multidimensional length mapping, default) or
    "lsh" (LSH band keys); `dims` sub-dictionaries, `parts` balanced intervals per
    dimension, and `rho` the interval enlarging factor ρ of the window (L·τ/ρ, L·ρ/τ).
    """

    preferred_suffixes: tuple[str, ...] = ()
    repair_share: float = 0.5
    repair_min_losers: int = 2
    tier2: str = "lengths"
    dims: int = 3
    parts: int = 16
    rho: float = 1.3


@dataclass
class PageUpdate:
    """One entry of an update batch: new text (or html), a redirect, or a removal."""

    url: str
    text: str | None = None
    html: str | bytes | None = None
    redirect_to: str | None = None
    links_in: int | None = None
    remove: bool = False


@dataclass
class BatchReport:
    """What one batch did (counts) and how long it took."""

    pages: int = 0
    new: int = 0
    changed: int = 0
    tier1: int = 0
    tier2: int = 0
    redirects: int = 0
    removed: int = 0
    comparisons: int = 0
    tier2_comparisons: int = 0  # signature comparisons made by tier 2 (in `comparisons` too)
    tier2_all_pairs: int = 0  # comparisons an unpartitioned many-to-all would have made
    groups_touched: int = 0
    repaired: int = 0
    recomputed: int = 0  # groups whose whole component was re-clustered
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class _Page:
    url: str
    group_id: int | None = None
    length: int = 0
    signature: np.ndarray | None = None
    lengths: np.ndarray | None = None  # N sub-dictionary lengths (tier-2 partition key)
    exact_fp: int | None = None
    redirect_to: str | None = None
    links_in: int = 0
    verified: bool = False
    removed: bool = False


def html_to_text(html: str | bytes, url: str = "http://localhost/") -> str:
    """Visible text of an HTML document, through the same extractor as scans."""
    payload = html.encode("utf-8") if isinstance(html, str) else html
    rec = RawRecord(
        source="api",
        offset=0,
        record_type="resource",
        url=url,
        content_type="text/html",
        payload=payload,
    )
    return extract_page(rec, links=False).text or ""


def winner_key(url: str, links_in: int, suffixes: Sequence[str] = ()) -> tuple:
    """Sort key of a would-be winner, best first.

    In-link popularity first (the page users and other sites point to), then static over
    dynamic URLs (no '?': more stable, better for users), then the shorter URL, then the
    market's preferred domain suffix, then the URL itself so that the choice is total and
    the same in every process.
    """
    host = (urlsplit(url).hostname or "").lower()
    rank = next((i for i, s in enumerate(suffixes) if host.endswith(s)), len(suffixes))
    return (-links_in, "?" in url, len(url), rank, url)


class _UnionFind:
    def __init__(self) -> None:
        self.parent: dict[Any, Any] = {}

    def find(self, x: Any) -> Any:
        self.parent.setdefault(x, x)
        root = x
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a: Any, b: Any) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def partition_group(
    urls: list[str],
    sigs: np.ndarray,
    links_in: list[int],
    threshold: float,
    options: ServiceOptions,
) -> list[list[int]]:
    """Groups (lists of indexes, winner first) of pages that were one group.

    Connected components of verified pairs (all pairs of the group are compared: a group is
    small next to the index), then the repair rule: a component where more than
    `repair_share` of the losers fail verification against the winner is split around
    winners (greedy: the best page and everything verified against it, then the rest).
    Shared by the incremental index and the full recomputation it is measured against.
    `links_in` is each page's popularity (own in-links plus those of pages redirecting to it).
    """
    n = len(urls)
    need = int(np.ceil(threshold * sigs.shape[1] - 1e-9)) if n else 0
    uf = _UnionFind()
    for i in range(n):
        uf.find(i)
    if n > 1:
        ii, jj = np.nonzero(np.triu(agreement_matrix(np.ascontiguousarray(sigs)) >= need, 1))
        for i, j in zip(ii.tolist(), jj.tolist(), strict=True):
            uf.union(i, j)
    comps: dict[int, list[int]] = {}
    for i in range(n):
        comps.setdefault(uf.find(i), []).append(i)
    out: list[list[int]] = []
    for comp in comps.values():
        out.extend(settle_component(comp, urls, sigs, links_in, threshold, options))
    return out


def settle_component(
    comp: list[int],
    urls: list[str],
    sigs: np.ndarray,
    links_in: list[int],
    threshold: float,
    options: ServiceOptions,
) -> list[list[int]]:
    """One component as one group (winner first), or split around winners when repaired."""
    order = sorted(comp, key=lambda i: winner_key(urls[i], links_in[i], options.preferred_suffixes))
    sims = (sigs[order] == sigs[order[0]]).mean(-1)
    losers = len(order) - 1
    failed = int((sims[1:] < threshold).sum())
    if losers < options.repair_min_losers or failed <= options.repair_share * losers:
        return [order]
    out = []
    rest = order
    while rest:
        sims = (sigs[rest] == sigs[rest[0]]).mean(-1)
        keep = sims >= threshold
        keep[0] = True
        out.append([i for i, k in zip(rest, keep, strict=True) if k])
        rest = [i for i, k in zip(rest, keep, strict=True) if not k]
    return out


class ServiceIndex:
    """A persistent two-tier duplicate index in `store/service.duckdb`.

    Not thread-safe by itself; the HTTP app serialises calls with `lock`.
    """

    def __init__(
        self,
        store: str | Path,
        settings: Settings | None = None,
        options: ServiceOptions | None = None,
    ) -> None:
        self.store = Path(store)
        open_folder(self.store, SERVICE_KIND)  # never a folder of the user's
        self.path = self.store / DB_NAME
        self.con = duckdb.connect(str(self.path))
        self.lock = threading.RLock()
        self.con.execute(_sql("schema.sql"))
        stored = dict(self.con.execute("SELECT key, value FROM settings").fetchall())
        if "settings" in stored:
            mine = Settings.from_json(stored["settings"])
            if settings is not None:
                mine.check_compatible(settings)
                if settings.threshold != mine.threshold:
                    raise SettingsError(
                        f"threshold: {settings.threshold!r} here, {mine.threshold!r} in the index"
                    )
            self.settings = mine
            self.options = (
                options
                if options is not None
                else ServiceOptions(**_tuple_lists(json.loads(stored["options"])))
            )
            self.next_group = int(stored.get("next_group", "1"))
        else:
            self.settings = settings or Settings()
            self.options = options or ServiceOptions()
            self.next_group = 1
            self._write_settings()
        s = self.settings
        if s.bands and s.rows:
            self.bands, self.rows = s.bands, s.rows
        else:
            self.bands, self.rows = recall_first_bands(s.threshold, s.num_perm, s.band_recall)
        self.threshold = s.threshold
        o = self.options
        if o.tier2 not in ("lengths", "lsh"):
            raise ServiceError(f"tier2 must be 'lengths' or 'lsh', not {o.tier2!r}")
        if o.dims < 1 or o.parts < 1 or o.rho < 1:
            raise ServiceError("dims and parts must be >= 1 and rho >= 1")
        self._load()

    # ---------------------------------------------------------------- state

    def _write_settings(self) -> None:
        rows = [
            ("settings", self.settings.to_json()),
            ("options", json.dumps(self.options.__dict__)),
            ("next_group", str(self.next_group)),
        ]
        store = getattr(self, "store_rows", None)
        if store is not None and store.map is not None:
            grid = {"edges": store.map.to_json(), "rows": store.map_rows}
            rows.append(("length_map", json.dumps(grid)))
        self.con.execute("DELETE FROM settings")
        self.con.executemany("INSERT INTO settings VALUES (?, ?)", rows)

    def _load(self) -> None:
        """Rebuild the in-memory copy from the last committed state."""
        stored = dict(self.con.execute("SELECT key, value FROM settings").fetchall())
        self.next_group = int(stored.get("next_group", "1"))
        self.pages: dict[str, _Page] = {}
        self.groups: dict[int, set[str]] = {}
        self.winners: dict[int, str] = {}
        self.redirects = RedirectGraph()
        o = self.options
        self.store_rows = SignatureStore(
            self.settings.num_perm,
            o.dims,
            self.threshold,
            o.tier2,
            o.parts,
            o.rho,
            self.bands,
            self.rows,
        )
        rows = self.con.execute(_sql("load_pages.sql")).fetchall()
        for url, _dk, gid, length, sig, fp, redir, links, verified, removed, dl in rows:
            p = _Page(
                url,
                gid,
                length or 0,
                None,
                exact_fp=fp,
                links_in=links or 0,
                verified=bool(verified),
                removed=bool(removed),
            )
            if redir:
                self._set_redirect(p, redir)
            if sig is not None:
                lens = np.asarray(dl, dtype=np.int32) if dl and len(dl) == o.dims else None
                if lens is None:  # a store written before the length mapping: spread evenly
                    lens = np.full(o.dims, p.length // o.dims, dtype=np.int32)
                sig_arr = np.frombuffer(sig, dtype="<u4").astype(SIGNATURE_DTYPE)
                self._set_signature(p, sig_arr, p.length, lens)
            self.pages[url] = p
            if gid is not None:
                self.groups.setdefault(gid, set()).add(url)
        for gid, winner in self.con.execute("SELECT group_id, winner_url FROM groups").fetchall():
            self.winners[gid] = winner
        if "length_map" in stored:
            grid = json.loads(stored["length_map"])
            if len(grid["edges"]) == o.dims:
                self.store_rows.map = LengthMap.from_json(grid["edges"])
                self.store_rows.map_rows = int(grid["rows"])

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> ServiceIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- reads

    def resolve(self, url: str) -> tuple[str, list[str]]:
        """Final URL of a redirect chain (and the chain), stopping at cycles or 32 hops."""
        chain = [url]
        seen = {url}
        cur = url
        for _ in range(MAX_REDIRECTS):
            p = self.pages.get(cur)
            if p is None or p.removed or not p.redirect_to:
                break
            cur = p.redirect_to
            if cur in seen:
                break
            seen.add(cur)
            chain.append(cur)
        return cur, chain

    def status(self, url: str) -> dict[str, Any] | None:
        """Group, winner and duplicate status of a stored URL (following redirects)."""
        p = self.pages.get(url)
        if p is None:
            return None
        final, chain = self.resolve(url)
        fp = self.pages.get(final)
        out: dict[str, Any] = {
            "url": url,
            "removed": p.removed,
            "redirect_chain": chain[1:],
            "final_url": final,
            "group_id": None,
            "winner_url": None,
            "is_duplicate": False,
            "verified": False,
        }
        if p.removed or fp is None or fp.removed or fp.group_id is None:
            return out
        winner = self.winners.get(fp.group_id)
        out.update(group_id=fp.group_id, winner_url=winner, verified=fp.verified)
        # A redirect is a duplicate of what it leads to; a loser only once verified.
        out["is_duplicate"] = bool(len(chain) > 1 or (final != winner and fp.verified))
        return out

    def group(self, gid: int) -> dict[str, Any] | None:
        members = self.groups.get(gid)
        if not members:
            return None
        winner = self.winners[gid]
        wsig = self.pages[winner].signature
        rows = []
        for url in sorted(members, key=lambda u: (u != winner, u)):
            p = self.pages[url]
            sim = float((p.signature == wsig).mean()) if p.signature is not None else 0.0
            rows.append(
                {
                    "url": url,
                    "winner": url == winner,
                    "verified": p.verified,
                    "resemblance": sim,
                    "links_in": p.links_in,
                    "popularity": self.popularity(url),
                }
            )
        redirects = sorted(
            {
                u
                for m in members
                for u in self.redirects.upstream(m)
                if self.resolve(u)[0] in members
            }
        )
        return {
            "group_id": gid,
            "winner_url": winner,
            "size": len(members),
            "members": rows,
            "redirects": redirects,
        }

    def popularity(self, url: str) -> int:
        """In-links of `url` plus those of every page redirecting to it (see popularity.py)."""
        return self.redirects.popularity(url, self._links_in)

    def _links_in(self, url: str) -> int:
        p = self.pages.get(url)
        return 0 if p is None or p.removed else p.links_in

    def check(self, text: str) -> dict[str, Any]:
        """Which stored group a text would join, without adding it (a tier-2 lookup)."""
        sk = sketch_text(text, self.settings)
        matches = []
        if sk.shingles.size:
            lens = dim_lengths([text], self.options.dims, self.settings.seed)
            found = self.store_rows.many_to_all(sk.minhash[None, :], lens)
            for row, sim in zip(found.row.tolist(), found.resemblance.tolist(), strict=True):
                url = self.store_rows.urls[row]
                assert url is not None
                gid = self.pages[url].group_id
                matches.append({"url": url, "group_id": gid, "resemblance": sim})
        matches.sort(key=lambda m: (-m["resemblance"], m["url"]))
        best = matches[0] if matches else None
        gid = best["group_id"] if best else None
        return {
            "is_duplicate": best is not None,
            "group_id": gid,
            "winner_url": self.winners.get(gid) if gid is not None else None,
            "matches": matches[:10],
            "length": sk.n_tokens,
        }

    def counts(self) -> dict[str, int]:
        live = [p for p in self.pages.values() if not p.removed]
        return {
            "pages": len(live),
            "redirects": sum(1 for p in live if p.redirect_to),
            "groups": len(self.groups),
            "duplicate_groups": sum(1 for m in self.groups.values() if len(m) > 1),
        }

    # ---------------------------------------------------------------- updates

    def apply(self, updates: Iterable[PageUpdate]) -> BatchReport:
        """Apply one batch as one transaction; on any error nothing of it remains."""
        t0 = time.perf_counter()
        batch: dict[str, PageUpdate] = {}
        for u in updates:
            if not u.url:
                raise ServiceError("an update needs a url")
            batch[u.url] = u  # the last entry for a URL wins
        with self.lock:
            self.con.execute("BEGIN TRANSACTION")
            try:
                report, dirty_pages, dirty_groups, dropped = self._compute(batch)
                self._write(dirty_pages, dirty_groups, dropped)
                self.con.execute("COMMIT")
            except BaseException:
                self.con.execute("ROLLBACK")
                self._load()
                raise
        report.seconds = time.perf_counter() - t0
        return report

    def _new_group(self) -> int:
        gid = self.next_group
        self.next_group += 1
        return gid

    def _set_signature(
        self, p: _Page, sig: np.ndarray | None, length: int, lens: np.ndarray | None = None
    ) -> None:
        """Set a page's sketch and keep the tier-2 row store in step. A page without
        shingles stays out of the store: its all-empty signature would match every other."""
        p.signature, p.length, p.lengths = sig, length, lens
        if sig is None or length == 0 or lens is None:
            self.store_rows.drop(p.url)
        else:
            self.store_rows.put(p.url, sig, lens)

    def _set_redirect(self, p: _Page, target: str | None) -> None:
        self.redirects.set(p.url, p.redirect_to, target)
        p.redirect_to = target

    def _detach(self, p: _Page, affected: set[int]) -> None:
        if p.group_id is not None:
            members = self.groups.get(p.group_id)
            if members is not None:
                members.discard(p.url)
                affected.add(p.group_id)
            p.group_id = None
        p.verified = False

    def _compute(
        self, batch: dict[str, PageUpdate]
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
        tau = self.threshold
        for url, u in batch.items():
            old = self.pages.get(url)
            p = old if old is not None else _Page(url)
            self.pages[url] = p
            dirty.add(url)
            if p.redirect_to and not p.removed:
                pop_targets.add(self.resolve(url)[0])  # loses (or changes) this credit
            if u.links_in is not None:
                if u.links_in < 0:
                    raise ServiceError(f"links_in must be >= 0 for {url}")
                p.links_in = int(u.links_in)
                if p.group_id is not None:
                    touched.add(p.group_id)
            if u.remove:
                if old is not None and not old.removed:
                    rep.removed += 1
                self._detach(p, affected)
                self._set_signature(p, None, 0)
                self._set_redirect(p, None)
                p.removed = True
                continue
            was_live = old is not None and not old.removed
            p.removed = False
            if u.redirect_to:
                if u.redirect_to == url:
                    raise ServiceError(f"{url} redirects to itself")
                rep.redirects += 1
                self._detach(p, affected)
                self._set_signature(p, None, 0)
                self._set_redirect(p, u.redirect_to)
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
            self._set_redirect(p, None)
            sk = sketch_text(text, self.settings)
            sig, length = sk.minhash, int(sk.shingles.size)
            lens = dim_lengths([text], self.options.dims, self.settings.seed)[0]
            p.exact_fp = fingerprint64(text.encode("utf-8", "surrogatepass"))
            if was_live:
                rep.changed += 1
            else:
                rep.new += 1
            gid = p.group_id
            if gid is not None and p.signature is not None and length:
                winner = self.winners.get(gid)
                wsig = p.signature if winner == url else self.pages[winner].signature
                rep.comparisons += 1
                if wsig is not None and float((sig == wsig).mean()) >= tau:
                    rep.tier1 += 1
                    self._set_signature(p, sig, length, lens)
                    touched.add(gid)
                    continue
            self._detach(p, affected)
            self._set_signature(p, sig, length, lens)
            tier2.append(url)
        rep.tier2 = len(tier2)
        self._tier2(tier2, rep, touched, dirty)
        pop_targets.update(self.resolve(url)[0] for url in redirected)
        for target in pop_targets:
            tp = self.pages.get(target)
            if tp is not None and tp.group_id is not None:
                touched.add(tp.group_id)
        for gid in list(affected):
            if gid in self.groups and not self.groups[gid]:
                del self.groups[gid]
                self.winners.pop(gid, None)
        dropped: set[int] = set(affected | touched)
        for gid in sorted(affected | touched):
            if gid in self.groups:
                rep.repaired += self._settle(gid, gid in affected, dirty, dropped)
        # A group that lost members or holds losers failing against the winner may no longer
        # be what a full recomputation would make of its component: re-cluster the component.
        suspects = {
            g
            for g in dropped
            if g in self.groups
            and (g in affected or any(not self.pages[u].verified for u in self.groups[g]))
        }
        if suspects:
            rep.recomputed += self._recompute_components(suspects, dirty, dropped)
        rep.groups_touched = len(affected | touched)
        return rep, dirty, {g for g in dropped if g in self.groups}, dropped

    def _tier2(self, urls: list[str], rep: BatchReport, touched: set[int], dirty: set[str]) -> None:
        """Many-to-all: the batch's tier-2 pages against the whole index (stored pages and
        the batch itself, already in the row store) in one compiled call, then merge what
        was matched. Pages without shingles are not queried and found nothing."""
        uf = _UnionFind()
        for url in urls:
            uf.find(url)
        st = self.store_rows
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
                {self.pages[m].group_id for m in others if self.pages[m].group_id is not None},
                key=lambda g: (-len(self.groups[g]), g),
            )
            target = gids[0] if gids else self._new_group()
            self.groups.setdefault(target, set())
            for g in gids[1:]:  # transitive: the page bridges groups, so they merge
                for m in self.groups.pop(g):
                    self.pages[m].group_id = target
                    dirty.add(m)  # its stored row still names the merged-away group
                    self.groups[target].add(m)
                self.winners.pop(g, None)
                touched.add(g)
            for m in members:
                self.pages[m].group_id = target
                self.groups[target].add(m)
            touched.add(target)

    def _settle(self, gid: int, affected: bool, dirty: set[str], dropped: set[int]) -> int:
        """Re-elect the winner, re-verify losers; re-check connectivity when a member left.
        Returns 1 when the group was repaired or split."""
        members = sorted(self.groups[gid])
        sigs = np.stack([self.pages[u].signature for u in members])
        links = [self.popularity(u) for u in members]
        if affected:
            parts = partition_group(members, sigs, links, self.threshold, self.options)
        else:
            comp = list(range(len(members)))
            parts = settle_component(comp, members, sigs, links, self.threshold, self.options)
        old_winner = self.winners.get(gid)
        parts.sort(key=lambda part: (old_winner not in [members[i] for i in part], -len(part)))
        for n, part in enumerate(parts):
            g = gid if n == 0 else self._new_group()
            self._install(g, part, members, sigs, dirty, dropped)
        return int(len(parts) > 1)

    def _recompute_components(self, seeds: set[int], dirty: set[str], dropped: set[int]) -> int:
        """Re-cluster, from scratch, the connected component around each seed group.

        The component is closed through tier 2: the members are compared with the index, the
        groups they match join, their members are compared in turn, until nothing new joins.
        Then `partition_group` (the rule a full recomputation applies to a component) decides
        the groups again. This is the paper's group repair ("recompute the duplicate
        membership of this group") widened to the component, because a group kept apart by
        an earlier split can be what makes a later group fail its checks. Returns the number
        of groups re-clustered.
        """
        st = self.store_rows
        uf = _UnionFind()
        seen = {g for g in seeds if g in self.groups}
        for g in seen:
            uf.find(g)
        frontier = sorted(u for g in seen for u in self.groups[g])
        while frontier:  # all seeds at once: one many-to-all call per round
            queries = [u for u in frontier if u in st.row_of]
            if not queries:
                break
            rows = np.array([st.row_of[u] for u in queries], dtype=np.int64)
            found = st.many_to_all(st.sigs[rows], st.lens[rows], rows)
            new: set[int] = set()
            for qi, r in zip(found.query.tolist(), found.row.tolist(), strict=True):
                url = st.urls[r]
                g = self.pages[url].group_id if url is not None else None
                mine = self.pages[queries[qi]].group_id
                if g is None or mine is None or g == mine:
                    continue
                uf.union(mine, g)
                if g not in seen:
                    seen.add(g)
                    new.add(g)
            frontier = sorted(u for g in new for u in self.groups[g])
        comps: dict[int, set[int]] = {}
        for g in sorted(seen):
            comps.setdefault(uf.find(g), set()).add(g)
        for gids in comps.values():
            self._regroup(gids, dirty, dropped)
        return len(seen)

    def _regroup(self, gids: set[int], dirty: set[str], dropped: set[int]) -> None:
        """Replace groups `gids` by `partition_group` of their pages; a part keeps the id of
        the old group its winner came from when that id is still free."""
        members = sorted(u for g in gids for u in self.groups[g])
        sigs = np.stack([self.pages[u].signature for u in members])
        links = [self.popularity(u) for u in members]
        parts = partition_group(members, sigs, links, self.threshold, self.options)
        old_of = {u: self.pages[u].group_id for u in members}
        for g in gids:
            del self.groups[g]
            self.winners.pop(g, None)
            dropped.add(g)
        parts.sort(key=lambda part: (-len(part), members[part[0]]))
        for part in parts:
            g = old_of[members[part[0]]]
            if g is None or g in self.groups:
                g = self._new_group()
            self._install(g, part, members, sigs, dirty, dropped)

    def _install(
        self,
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
        self.groups[g] = set(urls)
        self.winners[g] = urls[0]
        wsig = sigs[part[0]]
        for i, u in zip(part, urls, strict=True):
            p = self.pages[u]
            verified = bool(i == part[0] or (sigs[i] == wsig).mean() >= self.threshold)
            if p.group_id != g or p.verified != verified:
                dirty.add(u)
            p.group_id, p.verified = g, verified

    # ---------------------------------------------------------------- writes

    def _write(self, dirty: set[str], groups: set[int], dropped: set[int]) -> None:
        """Rewrite the touched page and group rows (inside the caller's transaction)."""
        now = datetime.now(timezone.utc).replace(tzinfo=None)
        con = self.con
        rows = [self.pages[u] for u in sorted(dirty)]
        table = pa.table(
            {
                "url": [p.url for p in rows],
                "doc_key": pa.array(
                    [fingerprint64(p.url.encode("utf-8", "surrogatepass")) for p in rows],
                    pa.int64(),
                ),
                "group_id": pa.array([p.group_id for p in rows], pa.int64()),
                "length": pa.array([p.length for p in rows], pa.int32()),
                "signature": pa.array(
                    [
                        None if p.signature is None else p.signature.astype("<u4").tobytes()
                        for p in rows
                    ],
                    pa.binary(),
                ),
                "exact_fp": pa.array([p.exact_fp for p in rows], pa.int64()),
                "redirect_to": pa.array([p.redirect_to for p in rows], pa.string()),
                "links_in": pa.array([p.links_in for p in rows], pa.int32()),
                "verified": pa.array([p.verified for p in rows], pa.bool_()),
                "updated_at": pa.array([now] * len(rows), pa.timestamp("us")),
                "removed": pa.array([p.removed for p in rows], pa.bool_()),
                "dim_lengths": pa.array(
                    [None if p.lengths is None else p.lengths.tolist() for p in rows],
                    pa.list_(pa.int32()),
                ),
            }
        )
        con.register("_svc_pages", table)
        con.execute("DELETE FROM pages WHERE url IN (SELECT url FROM _svc_pages)")
        con.execute("INSERT INTO pages BY NAME SELECT * FROM _svc_pages")
        con.unregister("_svc_pages")
        hook = os.environ.get(SLEEP_HOOK)
        if hook:
            print(TX_MARKER, flush=True)
            print(TX_MARKER, file=sys.stderr, flush=True)
            time.sleep(float(hook))
        gids = sorted(groups)
        gtable = pa.table(
            {
                "group_id": pa.array(gids, pa.int64()),
                "winner_url": [self.winners[g] for g in gids],
                "winner_signature": pa.array(
                    [self.pages[self.winners[g]].signature.astype("<u4").tobytes() for g in gids],
                    pa.binary(),
                ),
                "size": pa.array([len(self.groups[g]) for g in gids], pa.int32()),
                "failed": pa.array(
                    [sum(not self.pages[u].verified for u in self.groups[g]) for g in gids],
                    pa.int32(),
                ),
                "updated_at": pa.array([now] * len(gids), pa.timestamp("us")),
            }
        )
        con.register("_svc_groups", gtable)
        con.register("_svc_dropped", pa.table({"group_id": pa.array(sorted(dropped), pa.int64())}))
        con.execute("DELETE FROM groups WHERE group_id IN (SELECT group_id FROM _svc_dropped)")
        con.execute("INSERT INTO groups SELECT * FROM _svc_groups")
        con.unregister("_svc_groups")
        con.unregister("_svc_dropped")
        self._write_settings()

    # ---------------------------------------------------------------- checks

    def consistency_errors(self) -> list[str]:
        """Invariants of the stored state (used by tests and after a crash)."""
        errs = []
        for sql, what in _INVARIANTS:
            count = self.con.execute(sql).fetchone()[0]
            if count:
                errs.append(f"{count} {what}")
        return errs


def _tuple_lists(d: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
