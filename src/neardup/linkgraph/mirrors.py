"""Mirrored hosts: host pairs that serve the same content under the same URL suffixes.

Fetterly, Manasse & Najork (2004) start from content: two hosts are candidates when each has
at least 10 pages in near-duplicate clusters with a member on the other. Auto-mirrors (a host
with itself) and host aliases (one server under two names: equal once a leading "www." is
dropped, or sharing an address) are set apart. A candidate is then confirmed by its URLs: the
last 1..4 path arcs of each copy page are passed through a Bloom filter built from the other
host's suffixes (`rbloom`, keyed by cluster so that only near-duplicate pages can match).

Bharat & Broder (1999) start from URLs instead: hosts sharing many path suffixes are
candidates, confirmed by content. Both are run so that a report can say how many mirror pairs
each finds on the same crawl (Fetterly et al. found the content-first method more effective).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from rbloom import Bloom

from neardup.kernels.sorting import sorted_distinct
from neardup.linkgraph.relational import Connection, connect, query, run_sql

MIRRORS_FILE = "mirrors.parquet"
SUFFIX_METHOD_FILE = "mirrors_suffix_method.parquet"
MAX_ARCS = 4  # Fetterly et al.: the last four arcs of the path
BLOOM_ERROR = 1e-4


@dataclass(frozen=True)
class MirrorOptions:
    """min_pages:    pages each host must have in shared clusters (Fetterly et al.: 10).
    min_suffix_share: share of the copy's shared pages whose URL suffix must match for the
                  pair to be confirmed.
    full_coverage: share of both hosts' pages in shared clusters above which a pair is a
                  whole-host `mirror` rather than a `partial` one.
    max_suffix_hosts: Bharat & Broder method: suffixes on more hosts than this are ignored.
    """

    min_pages: int = 10
    min_suffix_share: float = 0.5
    full_coverage: float = 0.75
    max_suffix_hosts: int = 50

    def __post_init__(self) -> None:
        if self.min_pages < 1:
            raise ValueError(f"min_pages must be at least 1, not {self.min_pages}")
        for name in ("min_suffix_share", "full_coverage"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must lie in [0, 1], not {value}")


@dataclass
class Mirrors:
    """Mirror pairs found by content (`pairs`) and by URL suffixes (`suffix_pairs`).

    pairs: host_a, host_b, shared_pages, suffix_matches, kind, verdict, suffix_share,
           full_suffix_matches, shared_pages_a, pages_a, pages_b, shared_clusters,
           links_in_a, links_in_b (pages on other hosts linking in), alias_reason. host_a is
           the likely original, host_b the copy; shared_pages counts
           host_b's pages in clusters with a page on host_a; kind is mirror, partial or
           alias; verdict is confirmed (same paths), rerooted (same last arcs under another
           prefix) or unconfirmed.
    suffix_pairs: host_1, host_2, shared_suffixes, suffix_pages, content_matches, confirmed,
           alias (a pair involving a non-preferred alias name: never confirmed).
    """

    pairs: pa.Table
    suffix_pairs: pa.Table
    auto_mirrors: int
    options: MirrorOptions
    seconds: float = 0.0

    def confirmed(self) -> pa.Table:
        """Mirror and partial pairs whose URL suffixes confirm them (aliases excluded)."""
        kinds = self.pairs.column("kind").to_pylist()
        verdicts = self.pairs.column("verdict").to_pylist()
        mask = [k != "alias" and v != "unconfirmed" for k, v in zip(kinds, verdicts, strict=True)]
        return self.pairs.filter(pa.array(mask, pa.bool_()))

    def write(self, out_dir: str | Path) -> list[Path]:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        pq.write_table(self.pairs, out / MIRRORS_FILE)
        pq.write_table(self.suffix_pairs, out / SUFFIX_METHOD_FILE)
        return [out / MIRRORS_FILE, out / SUFFIX_METHOD_FILE]


def suffix_match_depth(
    keys_a: np.ndarray, keys_b: np.ndarray, docs_b: np.ndarray, depth_b: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each page of host b, the deepest k whose suffix key is in host a's Bloom filter.

    keys_*: hashed (cluster, last k arcs) keys, one per page and k; docs_b, depth_b: the page
    and k of each key of host b. Returns (pages of b, matched depth per page, 0 when none).
    The filter is exact up to its false-positive rate (1e-4); keys are integers hashed by
    DuckDB, so the filter's answers do not depend on Python's per-process string hashing.
    """
    bloom = Bloom(max(int(keys_a.size), 1), BLOOM_ERROR)
    bloom.update(keys_a.tolist())
    hit = np.fromiter(map(bloom.__contains__, keys_b.tolist()), dtype=bool, count=keys_b.size)
    pages, index = np.unique(docs_b, return_inverse=True)
    depth = np.zeros(pages.size, dtype=np.int64)
    np.maximum.at(depth, index, np.where(hit, depth_b, 0))
    return pages, depth


def _confirm(con: Connection, pairs: pa.Table) -> dict[str, list]:
    """Suffix matches of every pair: the Bloom filter of host_a, queried with host_b."""
    keys = query(con, "SELECT doc_id, host, cluster_id, arcs, k, key FROM suffix_keys")
    hosts = keys["host"].astype(str) if keys["host"].size else np.empty(0, dtype=str)
    out: dict[str, list] = {"suffix_matches": [], "full_suffix_matches": []}
    for host_a, host_b in zip(
        pairs.column("host_a").to_pylist(), pairs.column("host_b").to_pylist(), strict=True
    ):
        in_a, in_b = hosts == host_a, hosts == host_b
        # only clusters the two hosts share: the denominator is host_b's shared pages
        in_b &= np.isin(keys["cluster_id"], sorted_distinct(keys["cluster_id"][in_a]))
        pages, depth = suffix_match_depth(
            keys["key"][in_a].astype(np.uint64),
            keys["key"][in_b].astype(np.uint64),
            keys["doc_id"][in_b],
            keys["k"][in_b],
        )
        arcs = np.zeros(pages.size, dtype=np.int64)
        arcs[np.searchsorted(pages, keys["doc_id"][in_b])] = keys["arcs"][in_b]
        full = depth >= np.minimum(arcs, MAX_ARCS)
        out["suffix_matches"].append(int((depth > 0).sum()))
        out["full_suffix_matches"].append(int((full & (depth > 0)).sum()))
    return out


def _classify(pairs: pa.Table, matches: dict[str, list], options: MirrorOptions) -> pa.Table:
    """Add kind, verdict and suffix share (small per-pair arithmetic, vectorised)."""
    shared_b = np.asarray(pairs.column("shared_pages_b").to_pylist(), dtype=np.int64)
    shared_a = np.asarray(pairs.column("shared_pages_a").to_pylist(), dtype=np.int64)
    pages_a = np.asarray(pairs.column("pages_a").to_pylist(), dtype=np.int64)
    pages_b = np.asarray(pairs.column("pages_b").to_pylist(), dtype=np.int64)
    suffix = np.asarray(matches["suffix_matches"], dtype=np.int64)
    full = np.asarray(matches["full_suffix_matches"], dtype=np.int64)
    denom = np.maximum(shared_b, 1)
    share, full_share = suffix / denom, full / denom
    verdict = np.where(
        full_share >= options.min_suffix_share,
        "confirmed",
        np.where(share >= options.min_suffix_share, "rerooted", "unconfirmed"),
    )
    whole = (shared_a >= options.full_coverage * pages_a) & (
        shared_b >= options.full_coverage * pages_b
    )
    alias = np.asarray(
        [r is not None for r in pairs.column("alias_reason").to_pylist()], dtype=bool
    )
    kind = np.where(alias, "alias", np.where(whole, "mirror", "partial"))
    return pa.table(
        {
            "host_a": pairs.column("host_a"),
            "host_b": pairs.column("host_b"),
            "shared_pages": pa.array(shared_b),
            "suffix_matches": pa.array(suffix),
            "kind": pa.array(kind.tolist(), pa.string()),
            "verdict": pa.array(verdict.tolist(), pa.string()),
            "suffix_share": pa.array(np.round(share, 4)),
            "full_suffix_matches": pa.array(full),
            "shared_pages_a": pa.array(shared_a),
            "pages_a": pa.array(pages_a),
            "pages_b": pa.array(pages_b),
            "shared_clusters": pairs.column("shared_clusters"),
            "links_in_a": pairs.column("links_in_a"),
            "links_in_b": pairs.column("links_in_b"),
            "alias_reason": pairs.column("alias_reason"),
        }
    )


def _alias_names(pairs: pa.Table) -> set[str]:
    """The non-preferred names of alias pairs (host_b: fewer inbound links, fewer pages)."""
    return {
        r["host_b"] for r in pairs.select(["host_b", "kind"]).to_pylist() if r["kind"] == "alias"
    }


def _drop_alias_names(pairs: pa.Table) -> pa.Table:
    """Fetterly et al. keep one preferred name per server: a non-preferred alias name appears
    in its alias row only, never in a mirror pair of its own (it would repeat the preferred
    name's pairs)."""
    names = _alias_names(pairs)
    keep = [
        r["kind"] == "alias" or not ({r["host_a"], r["host_b"]} & names)
        for r in pairs.select(["host_a", "host_b", "kind"]).to_pylist()
    ]
    return pairs.filter(pa.array(keep, pa.bool_()))


def _mark_aliases(suffix_pairs: pa.Table, pairs: pa.Table) -> pa.Table:
    """The URL-suffix method under the same alias rule: pairs that are aliases, or that
    involve a non-preferred alias name, are marked `alias` and not confirmed as mirrors."""
    names = _alias_names(pairs)
    alias = [
        bool({r["host_1"], r["host_2"]} & names)
        for r in suffix_pairs.select(["host_1", "host_2"]).to_pylist()
    ]
    confirmed = [
        c and not a
        for c, a in zip(suffix_pairs.column("confirmed").to_pylist(), alias, strict=True)
    ]
    index = suffix_pairs.schema.get_field_index("confirmed")
    table = suffix_pairs.set_column(index, "confirmed", pa.array(confirmed, pa.bool_()))
    return table.append_column("alias", pa.array(alias, pa.bool_()))


def find_mirrors(con: Connection, options: MirrorOptions | None = None) -> Mirrors:
    """Mirror, partial-mirror and alias host pairs from the `pages` and `links` tables of `con`.

    Rows are ordered by kind (mirror, partial, alias), then shared pages (most first), then
    the host names. `con` is DuckDB or a `SparkSQLConnection`: the candidate, pair and suffix
    tables are built by its engine; the Bloom-filter confirmation and the classification run
    here, on the (small) candidate pairs.
    """
    options = options or MirrorOptions()
    started = time.perf_counter()
    params = {"min_pages": options.min_pages, "max_suffix_hosts": options.max_suffix_hosts}
    for name in ("mirror_hosts.sql", "mirror_candidates.sql", "mirror_pairs.sql"):
        run_sql(con, name, **params)
    run_sql(con, "suffix_keys.sql")
    pairs = con.sql("SELECT * FROM mirror_pairs ORDER BY host_a, host_b").to_arrow_table()
    result = _classify(pairs, _confirm(con, pairs), options)
    order = {"mirror": 0, "partial": 1, "alias": 2}
    rank = sorted(
        range(result.num_rows),
        key=lambda i: (
            order[result["kind"][i].as_py()],
            -result["shared_pages"][i].as_py(),
            result["host_a"][i].as_py(),
            result["host_b"][i].as_py(),
        ),
    )
    result = _drop_alias_names(result.take(pa.array(rank, pa.int64())))
    run_sql(con, "suffix_candidates.sql", **params)
    suffix_pairs = con.sql("SELECT * FROM suffix_pairs ORDER BY host_1, host_2").to_arrow_table()
    suffix_pairs = _mark_aliases(suffix_pairs, result)
    auto = int(query(con, "SELECT count(*) AS n FROM auto_mirrors")["n"][0])
    return Mirrors(result, suffix_pairs, auto, options, time.perf_counter() - started)


def mirrors_from_run(
    run: str | Path,
    options: MirrorOptions | None = None,
    engine: str = "embedded",
    spark_master: str | None = None,
) -> Mirrors:
    """`find_mirrors` on a finished run directory, on the `embedded` or `spark` engine
    (see `collections_from_run`)."""
    con = connect(run, engine, spark_master)
    try:
        return find_mirrors(con, options)
    finally:
        con.close()
