"""The incremental duplicate index: pages, duplicate groups with winners, and LSH band keys.

After Ask.com's incremental system (paper 004): every group of near-duplicates has one
*winner* whose signature represents the group. An updated page that still resembles its
winner stays where it is (tier 1, one comparison); anything else (new pages, pages that
drifted away) goes to tier 2, a batched many-to-all comparison through the LSH band keys of
every stored page. Groups are kept transitively (connected components of verified pairs);
a member that leaves makes its old group re-check its connectivity, and a group whose
losers mostly fail verification against the winner is repaired by splitting it around
winners (see `_partition`).

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
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import duckdb
import numpy as np
import pyarrow as pa

from neardup.candidates.tuning import recall_first_bands
from neardup.ingest import RawRecord, extract_page
from neardup.settings import Settings, SettingsError
from neardup.sketch import SIGNATURE_DTYPE, band_keys, fingerprint64, sketch_text

DB_NAME = "service.duckdb"
# Test hook: seconds to sleep inside the transaction (after the pages were rewritten, before
# groups and bands), printing a marker first, so a test can kill the process mid-batch.
SLEEP_HOOK = "NEARDUP_SERVICE_SLEEP_IN_TX"
TX_MARKER = "neardup-service: inside transaction"
MAX_REDIRECTS = 32


def _sql(name: str) -> str:
    return resources.files("neardup.service").joinpath("sql", name).read_text()


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
    """

    preferred_suffixes: tuple[str, ...] = ()
    repair_share: float = 0.5
    repair_min_losers: int = 2


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
    groups_touched: int = 0
    repaired: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class _Page:
    url: str
    group_id: int | None = None
    length: int = 0
    signature: np.ndarray | None = None
    keys: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))
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


def _pairs_within(sigs: np.ndarray, keys: np.ndarray, threshold: float) -> list[tuple[int, int]]:
    """Verified pairs (i < j) among n pages that share a band key, as a scan would find them."""
    n = len(sigs)
    out: list[tuple[int, int]] = []
    if n < 2:
        return out
    k = sigs.shape[1]
    block = max(1, (1 << 24) // max(1, n * k))
    for start in range(0, n, block):
        stop = min(n, start + block)
        sim = (sigs[start:stop, None, :] == sigs[None, :, :]).sum(-1) / k
        if keys.shape[1]:
            shared = (keys[start:stop, None, :] == keys[None, :, :]).any(-1)
        else:
            shared = np.zeros_like(sim, dtype=bool)
        ii, jj = np.nonzero(shared & (sim >= threshold))
        for i, j in zip(ii + start, jj, strict=True):
            if i < j:
                out.append((int(i), int(j)))
    return out


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
    keys: np.ndarray,
    links_in: list[int],
    threshold: float,
    options: ServiceOptions,
) -> list[list[int]]:
    """Groups (lists of indexes, winner first) of pages that were one group.

    Connected components of verified pairs, then the repair rule: a component where more
    than `repair_share` of the losers fail verification against the winner is split around
    winners (greedy: the best page and everything verified against it, then the rest).
    Shared by the incremental index and the full recomputation it is measured against.
    """
    uf = _UnionFind()
    for i in range(len(urls)):
        uf.find(i)
    for i, j in _pairs_within(sigs, keys, threshold):
        uf.union(i, j)
    comps: dict[int, list[int]] = {}
    for i in range(len(urls)):
        comps.setdefault(uf.find(i), []).append(i)
    out: list[list[int]] = []
    for comp in comps.values():
        out.extend(_settle_component(comp, urls, sigs, links_in, threshold, options))
    return out


def _settle_component(
    comp: list[int],
    urls: list[str],
    sigs: np.ndarray,
    links_in: list[int],
    threshold: float,
    options: ServiceOptions,
) -> list[list[int]]:
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
        self.store.mkdir(parents=True, exist_ok=True)
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
        self._load()

    # ---------------------------------------------------------------- state

    def _write_settings(self) -> None:
        rows = [
            ("settings", self.settings.to_json()),
            ("options", json.dumps(self.options.__dict__)),
            ("next_group", str(self.next_group)),
        ]
        self.con.execute("DELETE FROM settings")
        self.con.executemany("INSERT INTO settings VALUES (?, ?)", rows)

    def _load(self) -> None:
        """Rebuild the in-memory copy from the last committed state."""
        stored = dict(self.con.execute("SELECT key, value FROM settings").fetchall())
        self.next_group = int(stored.get("next_group", "1"))
        self.pages: dict[str, _Page] = {}
        self.groups: dict[int, set[str]] = {}
        self.winners: dict[int, str] = {}
        self.band_index: dict[int, set[str]] = {}
        rows = self.con.execute(_sql("load_pages.sql")).fetchall()
        for url, _dk, gid, length, sig, fp, redir, links, verified, removed in rows:
            p = _Page(
                url,
                gid,
                length or 0,
                None,
                exact_fp=fp,
                redirect_to=redir,
                links_in=links or 0,
                verified=bool(verified),
                removed=bool(removed),
            )
            if sig is not None:
                p.signature = np.frombuffer(sig, dtype="<u4").astype(SIGNATURE_DTYPE)
                p.keys = self._keys(p.signature, p.length)
                for k in p.keys.tolist():
                    self.band_index.setdefault(k, set()).add(url)
            self.pages[url] = p
            if gid is not None:
                self.groups.setdefault(gid, set()).add(url)
        for gid, winner in self.con.execute("SELECT group_id, winner_url FROM groups").fetchall():
            self.winners[gid] = winner

    def _keys(self, sig: np.ndarray, length: int) -> np.ndarray:
        if length == 0:  # no shingles: never a candidate (all positions EMPTY_VALUE)
            return np.empty(0, dtype=np.int64)
        return band_keys(sig[None, :], self.bands, self.rows)[0]

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
                }
            )
        redirects = sorted(
            u
            for u, p in self.pages.items()
            if p.redirect_to and not p.removed and self.resolve(u)[0] in members
        )
        return {
            "group_id": gid,
            "winner_url": winner,
            "size": len(members),
            "members": rows,
            "redirects": redirects,
        }

    def candidates(self, keys: np.ndarray, exclude: str | None = None) -> set[str]:
        out: set[str] = set()
        for k in keys.tolist():
            out |= self.band_index.get(k, set())
        out.discard(exclude)  # type: ignore[arg-type]
        return out

    def check(self, text: str) -> dict[str, Any]:
        """Which stored group a text would join, without adding it."""
        sk = sketch_text(text, self.settings)
        sig = sk.minhash
        keys = self._keys(sig, int(sk.shingles.size))
        cands = sorted(self.candidates(keys))
        matches = []
        if cands:
            sims = np.stack([self.pages[u].signature for u in cands]) == sig
            sims = sims.mean(-1)
            for u, s in zip(cands, sims.tolist(), strict=True):
                if s >= self.threshold:
                    matches.append({"url": u, "group_id": self.pages[u].group_id, "resemblance": s})
        matches.sort(key=lambda m: -m["resemblance"])
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
                report, dirty_pages, sig_dirty, dirty_groups, dropped = self._compute(batch)
                self._write(dirty_pages, sig_dirty, dirty_groups, dropped)
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

    def _set_signature(self, p: _Page, sig: np.ndarray | None, length: int) -> None:
        for k in p.keys.tolist():
            s = self.band_index.get(k)
            if s is not None:
                s.discard(p.url)
                if not s:
                    del self.band_index[k]
        p.signature = sig
        p.length = length
        p.keys = self._keys(sig, length) if sig is not None else np.empty(0, dtype=np.int64)
        for k in p.keys.tolist():
            self.band_index.setdefault(k, set()).add(p.url)

    def _detach(self, p: _Page, affected: set[int]) -> None:
        if p.group_id is not None:
            members = self.groups.get(p.group_id)
            if members is not None:
                members.discard(p.url)
                affected.add(p.group_id)
            p.group_id = None
        p.verified = False

    def _compute(self, batch: dict[str, PageUpdate]):
        rep = BatchReport(pages=len(batch))
        dirty: set[str] = set()
        sig_dirty: set[str] = set()
        affected: set[int] = set()  # lost a member: connectivity must be re-checked
        touched: set[int] = set()  # gained members or changed inside: winner re-elected
        tier2: list[str] = []
        tau = self.threshold
        for url, u in batch.items():
            old = self.pages.get(url)
            p = old if old is not None else _Page(url)
            self.pages[url] = p
            dirty.add(url)
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
                sig_dirty.add(url)
                p.removed, p.redirect_to = True, None
                continue
            was_live = old is not None and not old.removed
            p.removed = False
            if u.redirect_to:
                if u.redirect_to == url:
                    raise ServiceError(f"{url} redirects to itself")
                rep.redirects += 1
                self._detach(p, affected)
                self._set_signature(p, None, 0)
                sig_dirty.add(url)
                p.redirect_to = u.redirect_to
                continue
            if u.text is not None:
                text = u.text
            elif u.html is not None:
                text = html_to_text(u.html, url)
            else:
                if was_live and u.links_in is not None:
                    continue  # a popularity update only
                raise ServiceError(f"{url}: give text, html, redirect_to or remove")
            p.redirect_to = None
            sk = sketch_text(text, self.settings)
            sig, length = sk.minhash, int(sk.shingles.size)
            p.exact_fp = fingerprint64(text.encode("utf-8", "surrogatepass"))
            sig_dirty.add(url)
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
                    self._set_signature(p, sig, length)
                    touched.add(gid)
                    continue
            self._detach(p, affected)
            self._set_signature(p, sig, length)
            tier2.append(url)
        rep.tier2 = len(tier2)
        self._tier2(tier2, rep, touched)
        for gid in list(affected):
            if gid in self.groups and not self.groups[gid]:
                del self.groups[gid]
                self.winners.pop(gid, None)
        dropped: set[int] = set(affected | touched)
        for gid in sorted(affected | touched):
            if gid in self.groups:
                rep.repaired += self._settle(gid, gid in affected, dirty, dropped)
        rep.groups_touched = len(affected | touched)
        return rep, dirty, sig_dirty, {g for g in dropped if g in self.groups}, dropped

    def _tier2(self, urls: list[str], rep: BatchReport, touched: set[int]) -> None:
        """Many-to-all: every tier-2 page against the band-key candidates of the whole index
        (stored pages and the batch itself), then merge what was matched."""
        uf = _UnionFind()
        tau = self.threshold
        for url in urls:
            p = self.pages[url]
            uf.find(url)
            cands = [
                c
                for c in self.candidates(p.keys, exclude=url)
                if (q := self.pages[c]).signature is not None and not q.removed
            ]
            rep.comparisons += len(cands)
            if not cands:
                continue
            sims = (np.stack([self.pages[c].signature for c in cands]) == p.signature).mean(-1)
            for c, s in zip(cands, sims.tolist(), strict=True):
                if s >= tau:
                    uf.union(url, c)
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
        links = [self.pages[u].links_in for u in members]
        if affected:
            kmax = max(len(self.pages[u].keys) for u in members)
            keys = np.full((len(members), kmax), -1, dtype=np.int64)
            for i, u in enumerate(members):
                k = self.pages[u].keys
                keys[i, : len(k)] = k
                keys[i, len(k) :] = -2 - i  # padding never matches
            parts = partition_group(members, sigs, keys, links, self.threshold, self.options)
        else:
            comp = list(range(len(members)))
            parts = _settle_component(comp, members, sigs, links, self.threshold, self.options)
        old_winner = self.winners.get(gid)
        parts.sort(key=lambda part: (old_winner not in [members[i] for i in part], -len(part)))
        for n, part in enumerate(parts):
            g = gid if n == 0 else self._new_group()
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
        return int(len(parts) > 1)

    # ---------------------------------------------------------------- writes

    def _write(
        self, dirty: set[str], sig_dirty: set[str], groups: set[int], dropped: set[int]
    ) -> None:
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
            }
        )
        con.register("_svc_pages", table)
        con.execute("DELETE FROM pages WHERE url IN (SELECT url FROM _svc_pages)")
        con.execute("INSERT INTO pages SELECT * FROM _svc_pages")
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
        band_urls, band_nos, band_keys_ = [], [], []
        for u in sorted(sig_dirty):
            for b, k in enumerate(self.pages[u].keys.tolist()):
                band_urls.append(u)
                band_nos.append(b)
                band_keys_.append(k)
        con.register("_svc_sig", pa.table({"url": sorted(sig_dirty)}))
        con.execute("DELETE FROM bands WHERE url IN (SELECT url FROM _svc_sig)")
        con.unregister("_svc_sig")
        con.register(
            "_svc_bands",
            pa.table(
                {
                    "band": pa.array(band_nos, pa.int16()),
                    "key": pa.array(band_keys_, pa.int64()),
                    "url": pa.array(band_urls, pa.string()),
                }
            ),
        )
        con.execute("INSERT INTO bands SELECT * FROM _svc_bands")
        con.unregister("_svc_bands")
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
