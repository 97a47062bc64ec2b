"""Crawls over time: a store of crawls, cluster evolution, page change, lost and found, and
on-the-fly resemblance queries.

A *store* is a folder holding `crawls.json` (the crawl labels in order, with their fetch-time
range) and one ordinary run directory per crawl under `crawls/LABEL/`. All crawls of a store
must be sketched with the same sketch settings, so their min-hash signatures compare.

- Cluster evolution follows Fetterly, Manasse & Najork (2003): for URL u in crawls m and n,
  Φ = |C_m(u) ∩ C_n(u)| / |C_n(u)| and Ψ = |C_m(u) ∩ C_n(u)| / |C_m(u) ∪ C_n(u)|, averaged by
  the size of u's cluster in crawl m (SQL in `crawls/sql/`). Like the paper, every later
  crawl is compared with the first (cumulative) and with the one before it (consecutive).
- Page change counts agreeing min-hash values between the two fetches of a URL (K + 1 when the
  payloads are identical) and buckets them like the paper's 0 / 1-28 / 29-56 / 57-83 / 84 / 85
  for K = 84, scaled to any K.
- Lost and found (Broder et al. 1997, §4) and on-the-fly resemblance look a signature up in a
  per-crawl LSH band index: for each band the sorted band keys and their signature rows,
  memory-mapped, so one query is `bands` binary searches plus one comparison per candidate.
"""

from __future__ import annotations

import json
import mimetypes
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.api import shingle_set
from neardup.config import Settings, SettingsError
from neardup.ingest.extract import extract_page
from neardup.ingest.record import RawRecord
from neardup.kernels import EMPTY_VALUE, band_keys, containment, sketch_text
from neardup.kernels.tuning import recall_first_bands
from neardup.pipeline.scan import ScanResult, scan
from neardup.store import load_settings, sql_path
from neardup.store.outputs import open_folder, replace_file_atomically
from neardup.store.run import RunError, open_run
from neardup.store.sql_files import package_sql

CRAWLS_FILE = "crawls.json"
STORE_KIND = "store of crawls"
INDEX_KEYS = "band_keys.npy"
INDEX_ROWS = "band_rows.npy"
INDEX_META = "band_index.json"
# The index catches pages down to this resemblance (recall first, 0.95 at exactly 0.5), so a
# document filling half of a larger page is still a candidate for the containment check.
INDEX_THRESHOLD = 0.5
MAX_BUCKET = 2000  # rows read per band and query: a boilerplate bucket cannot blow a query up
# Fetterly et al.'s page-change buckets, from the most change to none (`change_order` 0..5).
CHANGES = ("complete", "large", "medium", "small", "no text change", "no change")


class StoreError(RuntimeError):
    """A store that is missing, empty, or holds an unknown crawl or URL."""


# ---------------------------------------------------------------------------------------------
# The store


def _sql(name: str) -> str:
    return package_sql("crawls/sql", name)


def list_crawls(store: str | Path) -> list[dict[str, Any]]:
    """The crawls of a store, oldest first, as recorded in `crawls.json`."""
    path = Path(store) / CRAWLS_FILE
    if not path.exists():
        return []
    return json.loads(path.read_text(encoding="utf-8"))["crawls"]


def crawl_dir(store: str | Path, label: str | None = None) -> Path:
    """The run directory of a crawl (the latest when `label` is None)."""
    crawls = list_crawls(store)
    if not crawls:
        raise StoreError(f"{store} holds no crawl; add one with `neardup crawl`")
    if label is None:
        return Path(store) / crawls[-1]["path"]
    for entry in crawls:
        if entry["label"] == label:
            return Path(store) / entry["path"]
    known = ", ".join(e["label"] for e in crawls)
    raise StoreError(f"no crawl {label!r} in {store} (known: {known})")


def _write_crawls(store: Path, crawls: list[dict[str, Any]]) -> None:
    """Atomically: a reader sees the old list or the new one, never half a file."""
    text = json.dumps({"crawls": crawls}, indent=2) + "\n"
    replace_file_atomically(store / CRAWLS_FILE, text.encode("utf-8"))


def add_crawl(
    inputs: list[str | Path],
    store: str | Path,
    label: str,
    settings: Settings | None = None,
    workers: int | None = None,
    base_url: str | None = None,
    force: bool = False,
) -> ScanResult:
    """Scan `inputs` into `store/crawls/LABEL/`, index it, and list it in `crawls.json`.

    Refuses settings whose sketches could not be compared with the crawls already stored,
    before any work, since evolution and lost-and-found compare signatures across crawls.
    """
    if not label or "/" in label or label.startswith("."):
        raise StoreError(f"bad crawl label {label!r}: use a plain name such as 2024-04")
    store = Path(store)
    open_folder(store, STORE_KIND, inputs)  # never a folder of the user's, never an input
    settings = settings or Settings()
    crawls = list_crawls(store)
    for entry in crawls:
        other = load_settings(store / entry["path"])
        try:
            settings.check_compatible(other)
        except SettingsError as err:
            raise SettingsError(f"crawl {entry['label']!r} of {store}: {err}") from None
    result = scan(inputs, store / "crawls" / label, settings, workers, base_url, force)
    build_band_index(result.path)
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        first, last, pages = con.execute(
            # ISO strings from DuckDB: a TIMESTAMPTZ fetched into Python would need pytz.
            "SELECT strftime(min(fetched_at), '%Y-%m-%dT%H:%M:%SZ'), "
            "strftime(max(fetched_at), '%Y-%m-%dT%H:%M:%SZ'), count(*) FROM read_parquet(?)",
            [str(result.path / "pages.parquet")],
        ).fetchone()
    finally:
        con.close()
    entry = {
        "label": label,
        "path": f"crawls/{label}",
        "pages": int(pages),
        "fetched_from": None if first is None else str(first),
        "fetched_to": None if last is None else str(last),
    }
    labels = [e["label"] for e in crawls]
    if label in labels:
        crawls[labels.index(label)] = entry
    else:
        crawls.append(entry)
    _write_crawls(store, crawls)
    return result


# ---------------------------------------------------------------------------------------------
# Cluster evolution and page change


def _connect() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(_sql("macros.sql"))
    return con


def phi_psi(
    urls_m: np.ndarray | list[str],
    clusters_m: np.ndarray | list[int],
    urls_n: np.ndarray | list[str],
    clusters_n: np.ndarray | list[int],
) -> pa.Table:
    """Φ and Ψ for every URL in both clusterings (one label per URL; a URL alone in its
    cluster is a singleton). Columns: url, size_m, size_n, common, phi, psi, bucket_lo,
    bucket; rows sorted by url. The same SQL as `evolution`, on plain arrays."""
    m = pa.table(
        {"url": pa.array(urls_m, pa.string()), "cluster": pa.array(clusters_m, pa.int64())}
    )
    n = pa.table(
        {"url": pa.array(urls_n, pa.string()), "cluster": pa.array(clusters_n, pa.int64())}
    )
    con = _connect()
    try:
        con.register("m", m)
        con.register("n", n)
        return con.sql(_sql("phi_psi.sql")).to_arrow_table()
    finally:
        con.close()


def change_buckets(agree: np.ndarray, k: int) -> list[str]:
    """Fetterly's change bucket of each agreement count (0..K, K + 1 for identical payloads)."""
    con = _connect()
    try:
        table = pa.table({"agree": pa.array(np.asarray(agree), pa.int64())})
        con.register("t", table)
        return [
            r[0] for r in con.execute(f"SELECT change_bucket(agree, {int(k)}) FROM t").fetchall()
        ]
    finally:
        con.close()


def _row_lookup(docs: np.ndarray) -> np.ndarray:
    """doc_id -> signature row (-1 where the document has no signature)."""
    size = int(docs.max()) + 1 if docs.size else 0
    rows = np.full(size, -1, dtype=np.int64)
    rows[docs] = np.arange(docs.size)
    return rows


def signature_agreement(
    sig_a: np.ndarray, rows_a: np.ndarray, sig_b: np.ndarray, rows_b: np.ndarray, chunk: int = 65536
) -> np.ndarray:
    """Equal min-hash positions of row pairs of two (memory-mapped) signature matrices, read a
    chunk at a time so a million pairs never load both matrices whole."""
    out = np.empty(rows_a.size, dtype=np.int64)
    for start in range(0, rows_a.size, chunk):
        a = sig_a[rows_a[start : start + chunk]]
        b = sig_b[rows_b[start : start + chunk]]
        out[start : start + chunk] = np.count_nonzero(a == b, axis=1)
    return out


@dataclass
class Evolution:
    """Per-URL and summary tables of `evolution` (all pyarrow).

    Every table starts with crawl_m, crawl_n (the earlier and the later crawl compared) and
    the flags `consecutive` (n directly follows m) and `cumulative` (m is the first crawl);
    the first two crawls are both, so each pair of crawls is compared, and counted, once.
    """

    phi_psi: pa.Table
    changes: pa.Table
    phi_psi_summary: pa.Table
    change_summary: pa.Table
    hosts: pa.Table


@dataclass(frozen=True)
class Comparison:
    """Two crawls compared by `evolution`, by their positions in the store."""

    m: int
    n: int
    consecutive: bool
    cumulative: bool


def comparisons(crawls: int) -> list[Comparison]:
    """The pairs of crawls Fetterly et al. compare: each later crawl n against the first
    (cumulative: how far clusters drift from where they started, figures 4, 5 and 7) and
    against crawl n - 1 (consecutive: week-over-week change, figures 8-10). Ordered by n, then
    m; the pair (first, second) is listed once, as both."""
    out = []
    for n in range(1, crawls):
        if n > 1:
            out.append(Comparison(0, n, consecutive=False, cumulative=True))
        out.append(Comparison(n - 1, n, consecutive=True, cumulative=n == 1))
    return out


def _crawl_views(con: duckdb.DuckDBPyConnection, name: str, run: Path) -> None:
    query = _sql("crawl_pages.sql").format(path=sql_path(run / "pages.parquet"))
    con.execute(f"CREATE OR REPLACE TEMP TABLE {name} AS {query}")


def _compare(
    con: duckdb.DuckDBPyConnection, run_m: Path, run_n: Path, labels: dict[str, Any]
) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(Φ/Ψ per URL, hosts, page change per URL) of crawl m against crawl n."""
    k = load_settings(run_m).num_perm
    _crawl_views(con, "m", run_m)
    _crawl_views(con, "n", run_n)
    phi = _prepend(con.sql(_sql("phi_psi.sql")).to_arrow_table(), labels)
    hosts = _prepend(con.sql(_sql("hosts.sql")).to_arrow_table(), labels)
    pairs = con.sql(_sql("change_pairs.sql")).to_arrow_table()
    docs_m, sig_m = _signatures(run_m)
    docs_n, sig_n = _signatures(run_n)
    rows_m = _row_lookup(docs_m)[pairs["doc_m"].to_numpy()]
    rows_n = _row_lookup(docs_n)[pairs["doc_n"].to_numpy()]
    agree = signature_agreement(sig_m, rows_m, sig_n, rows_n)
    agree = np.where(pairs["same_payload"].to_numpy(zero_copy_only=False), k + 1, agree)
    table = pairs.append_column("agree", pa.array(agree, pa.int64())).append_column(
        "k", pa.array(np.full(agree.size, k), pa.int64())
    )
    return phi, hosts, _prepend(table, labels)


def evolution(store: str | Path, write: bool = True) -> Evolution:
    """Φ/Ψ, host stability and page change of every later crawl of a store against the first
    crawl (cumulative) and against the crawl before it (consecutive); with `write`, the
    per-URL tables go to `evolution_phi_psi.parquet` and `evolution_changes.parquet` in the
    store (the `neardup report` of a store calls it without writing)."""
    store = Path(store)
    crawls = list_crawls(store)
    if len(crawls) < 2:
        raise StoreError(f"{store} holds {len(crawls)} crawl(s); evolution needs two or more")
    con = _connect()
    phis, changes, hosts = [], [], []
    try:
        for c in comparisons(len(crawls)):
            old, new = crawls[c.m], crawls[c.n]
            labels = {
                "crawl_m": old["label"],
                "crawl_n": new["label"],
                "consecutive": c.consecutive,
                "cumulative": c.cumulative,
            }
            phi, host, change = _compare(con, store / old["path"], store / new["path"], labels)
            phis.append(phi)
            hosts.append(host)
            changes.append(change)
        con.register("comparison_order", _comparison_order(crawls))
        con.register("phi_psi", pa.concat_tables(phis))
        con.register("changes_raw", pa.concat_tables(changes))
        all_changes = con.sql(
            "SELECT *, change_bucket(agree, k) AS change, change_order(agree, k) AS change_order"
            " FROM changes_raw"
        ).to_arrow_table()
        con.register("changes", all_changes)
        result = Evolution(
            phi_psi=pa.concat_tables(phis),
            changes=all_changes,
            phi_psi_summary=con.sql(_sql("phi_psi_summary.sql")).to_arrow_table(),
            change_summary=con.sql(_sql("change_summary.sql")).to_arrow_table(),
            hosts=pa.concat_tables(hosts),
        )
    finally:
        con.close()
    if write:
        pq.write_table(result.phi_psi, store / "evolution_phi_psi.parquet", compression="zstd")
        pq.write_table(result.changes, store / "evolution_changes.parquet", compression="zstd")
    return result


def _comparison_order(crawls: list[dict[str, Any]]) -> pa.Table:
    """(crawl_m, crawl_n, pair): the summaries follow crawl order, not label order, since
    labels such as `old` and `new` do not sort by time."""
    pairs = comparisons(len(crawls))
    return pa.table(
        {
            "crawl_m": [crawls[c.m]["label"] for c in pairs],
            "crawl_n": [crawls[c.n]["label"] for c in pairs],
            "pair": pa.array(range(len(pairs)), pa.int64()),
        }
    )


def _prepend(table: pa.Table, labels: dict[str, Any]) -> pa.Table:
    """The comparison's labels as leading constant columns (string or bool)."""
    for i, (name, value) in enumerate(labels.items()):
        kind = pa.bool_() if isinstance(value, bool) else pa.string()
        table = table.add_column(i, name, pa.array([value] * table.num_rows, kind))
    return table


def _signatures(run: Path) -> tuple[np.ndarray, np.ndarray]:
    sig = np.load(run / "signatures.npy", mmap_mode="r")
    return np.load(run / "signature_docs.npy"), sig


# ---------------------------------------------------------------------------------------------
# LSH band index


def build_band_index(
    run: str | Path, threshold: float | None = None, chunk: int = 262144
) -> dict[str, Any]:
    """Write the crawl's band index: per band, the sorted keys and their signature rows.

    Bands are tuned recall first (the scan's own rule) for `threshold`, by default the lower
    of the crawl's threshold and INDEX_THRESHOLD, so queries can find contained pages. Pages
    without shingles are left out: their empty signatures would all share every band.
    """
    run = Path(run)
    settings = load_settings(run)
    if threshold is None:
        threshold = min(settings.threshold, INDEX_THRESHOLD)
    bands, rows = recall_first_bands(threshold, settings.num_perm, settings.band_recall)
    sig = np.load(run / "signatures.npy", mmap_mode="r")
    parts_k, parts_r = [], []
    for start in range(0, sig.shape[0], chunk):
        block = np.asarray(sig[start : start + chunk])
        keep = np.flatnonzero(~(block == EMPTY_VALUE).all(axis=1))
        parts_k.append(band_keys(block[keep], bands, rows).T)
        parts_r.append((keep + start).astype(np.int32))
    keys = np.concatenate(parts_k, axis=1) if parts_k else np.empty((bands, 0), np.int64)
    row_ids = np.concatenate(parts_r) if parts_r else np.empty(0, np.int32)
    order = np.argsort(keys, axis=1, kind="stable")
    np.save(run / INDEX_KEYS, np.take_along_axis(keys, order, axis=1))
    np.save(run / INDEX_ROWS, row_ids[order])
    meta = {"bands": bands, "rows": rows, "threshold": threshold, "pages": int(row_ids.size)}
    (run / INDEX_META).write_text(json.dumps(meta) + "\n", encoding="utf-8")
    return meta


@dataclass
class BandIndex:
    """A crawl's memory-mapped band index and signatures."""

    keys: np.ndarray  # bands x N int64, each band sorted
    rows: np.ndarray  # bands x N int32 signature rows
    bands: int
    rows_per_band: int
    signatures: np.ndarray  # N_docs x K
    docs: np.ndarray  # doc_id of each signature row

    @classmethod
    def open(cls, run: str | Path) -> BandIndex:
        """Open the index, building it first when the crawl has none."""
        run = Path(run)
        if not (run / INDEX_META).exists():
            build_band_index(run)
        meta = json.loads((run / INDEX_META).read_text(encoding="utf-8"))
        docs, sig = _signatures(run)
        return cls(
            keys=np.load(run / INDEX_KEYS, mmap_mode="r"),
            rows=np.load(run / INDEX_ROWS, mmap_mode="r"),
            bands=meta["bands"],
            rows_per_band=meta["rows"],
            signatures=sig,
            docs=docs,
        )

    def lookup(
        self, queries: np.ndarray, min_resemblance: float = 0.0
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(query index, doc_id, estimated resemblance) of every page sharing a band with a
        query signature (Q x K) and estimated at least `min_resemblance`.

        Vectorised over queries: per band one `searchsorted` of all query keys, then the
        matching ranges are expanded with `np.repeat`; no Python loop over pages."""
        queries = np.atleast_2d(queries)
        qkeys = band_keys(queries, self.bands, self.rows_per_band)
        qs, rs = [], []
        for j in range(self.bands):
            keys = self.keys[j]
            lo = np.searchsorted(keys, qkeys[:, j], side="left")
            hi = np.minimum(np.searchsorted(keys, qkeys[:, j], side="right"), lo + MAX_BUCKET)
            counts = hi - lo
            total = int(counts.sum())
            if total == 0:
                continue
            qi = np.repeat(np.arange(queries.shape[0]), counts)
            offsets = np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)
            qs.append(qi)
            rs.append(np.asarray(self.rows[j][np.repeat(lo, counts) + offsets], dtype=np.int64))
        if not qs:
            empty = np.empty(0, np.int64)
            return empty, empty, np.empty(0, np.float64)
        pair = np.unique(np.concatenate(qs) * (self.signatures.shape[0] + 1) + np.concatenate(rs))
        qi, row = np.divmod(pair, self.signatures.shape[0] + 1)
        est = signature_agreement(queries, qi, self.signatures, row) / queries.shape[1]
        keep = est >= min_resemblance
        return qi[keep], self.docs[row[keep]].astype(np.int64), est[keep]


# ---------------------------------------------------------------------------------------------
# Lost and found, and queries


def _url_rows(run: Path, urls: list[str] | None = None, docs: np.ndarray | None = None) -> pa.Table:
    """doc_id, url of compared pages of a crawl, by URL or by doc_id."""
    con = duckdb.connect()
    try:
        base = f"SELECT doc_id, url FROM read_parquet('{sql_path(run / 'pages.parquet')}')"
        if urls is not None:
            con.register("wanted", pa.table({"url": pa.array(urls, pa.string())}))
            sql = f"{base} WHERE skipped_reason IS NULL AND url IN (SELECT url FROM wanted)"
        else:
            con.register("wanted", pa.table({"doc_id": pa.array(docs, pa.int64())}))
            sql = f"{base} WHERE doc_id IN (SELECT doc_id FROM wanted)"
        return con.sql(sql + " ORDER BY doc_id").to_arrow_table()
    finally:
        con.close()


def _signature_of(run: Path, doc_id: int) -> np.ndarray:
    docs, sig = _signatures(run)
    row = np.searchsorted(docs, doc_id)
    if row >= docs.size or docs[row] != doc_id:
        raise StoreError(f"document {doc_id} of {run} has no signature")
    return np.asarray(sig[row])


def last_known(store: str | Path, url: str) -> tuple[str, int]:
    """(crawl label, doc_id) of the latest fetch of `url` that has a signature."""
    for entry in reversed(list_crawls(store)):
        run = Path(store) / entry["path"]
        found = _url_rows(run, urls=[url])
        if found.num_rows:
            return entry["label"], int(found["doc_id"][0].as_py())
    raise StoreError(f"{url} is in no crawl of {store}")


def find_moved(
    store: str | Path, url: str, threshold: float | None = None, limit: int = 5
) -> list[dict[str, Any]]:
    """Pages of the latest crawl, other than `url`, whose content resembles the last known
    content of `url` (estimated resemblance >= threshold), best first."""
    label, doc = last_known(store, url)
    sig = _signature_of(crawl_dir(store, label), doc)
    latest = crawl_dir(store)
    threshold = load_settings(latest).threshold if threshold is None else threshold
    _, found, est = BandIndex.open(latest).lookup(sig[None, :], threshold)
    names = _url_rows(latest, docs=found)
    by_doc = dict(zip(names["doc_id"].to_pylist(), names["url"].to_pylist(), strict=True))
    hits = [
        {"url": by_doc.get(int(d)), "doc_id": int(d), "resemblance": float(e), "last_seen": label}
        for d, e in zip(found, est, strict=True)
        if by_doc.get(int(d)) != url
    ]
    return sorted(hits, key=lambda h: (-h["resemblance"], h["url"] or ""))[:limit]


def find_moved_all(store: str | Path, threshold: float | None = None) -> pa.Table:
    """For every URL compared in the previous crawl and gone from the latest: its most
    similar page of the latest crawl. Writes `moved.parquet` (old_url, new_url, resemblance;
    new_url NULL when nothing reaches the threshold)."""
    store = Path(store)
    crawls = list_crawls(store)
    if len(crawls) < 2:
        raise StoreError(f"{store} holds {len(crawls)} crawl(s); lost and found needs two")
    prev, latest = store / crawls[-2]["path"], store / crawls[-1]["path"]
    threshold = load_settings(latest).threshold if threshold is None else threshold
    con = duckdb.connect()
    try:
        gone = con.sql(
            f"""
            SELECT min(doc_id) AS doc_id, url
            FROM read_parquet('{sql_path(prev / "pages.parquet")}')
            WHERE skipped_reason IS NULL AND url IS NOT NULL AND url NOT IN (
                SELECT url FROM read_parquet('{sql_path(latest / "pages.parquet")}')
                WHERE url IS NOT NULL)
            GROUP BY url ORDER BY url
            """
        ).to_arrow_table()
    finally:
        con.close()
    docs_prev, sig_prev = _signatures(prev)
    rows = _row_lookup(docs_prev)[gone["doc_id"].to_numpy()]
    qi, found, est = BandIndex.open(latest).lookup(np.asarray(sig_prev[rows]), threshold)
    order = np.lexsort((-est, qi))  # best match first within each query
    qi, found, est = qi[order], found[order], est[order]
    first = np.unique(qi, return_index=True)[1]
    new_doc = np.full(gone.num_rows, -1, dtype=np.int64)
    best = np.full(gone.num_rows, np.nan)
    new_doc[qi[first]] = found[first]
    best[qi[first]] = est[first]
    names = _url_rows(latest, docs=new_doc[new_doc >= 0])
    by_doc = dict(zip(names["doc_id"].to_pylist(), names["url"].to_pylist(), strict=True))
    table = pa.table(
        {
            "old_url": gone["url"],
            "new_url": pa.array([by_doc.get(int(d)) for d in new_doc], pa.string()),
            "resemblance": pa.array(best, pa.float64(), mask=np.isnan(best)),
        }
    )
    pq.write_table(table, store / "moved.parquet", compression="zstd")
    return table


def document_text(path: str | Path) -> str:
    """Visible text of a local html, txt or pdf file, through the scan's own extraction."""
    path = Path(path)
    content_type = mimetypes.guess_type(path.name)[0] or "text/html"
    record = RawRecord(
        source=str(path),
        offset=0,
        record_type="file",
        url=path.resolve().as_uri(),
        content_type=content_type,
        payload=path.read_bytes(),
    )
    page = extract_page(record, links=False)
    if page.skipped_reason or not page.text:
        raise StoreError(f"{path}: {page.skipped_reason or 'no text'}")
    return page.text


def query(
    store: str | Path,
    document: str | Path,
    crawl: str | None = None,
    threshold: float = 0.5,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """Pages of a crawl (the latest by default) that `document` (a local file, or a URL of
    the store) resembles or is contained in.

    Candidates come from the band index; each gets its estimated resemblance and the exact
    containment c(document, page) from the page's stored text, and is kept when either
    reaches `threshold`."""
    store = Path(store)
    run = crawl_dir(store, crawl)
    settings = load_settings(run)
    if Path(document).is_file():
        text = document_text(document)
    else:
        label, doc = last_known(store, str(document))
        with open_run(crawl_dir(store, label)) as con:
            row = con.execute("SELECT text FROM page_text WHERE doc_id = ?", [doc]).fetchone()
        if row is None:
            raise StoreError(f"{document} has no stored text")
        text = row[0]
    sk = sketch_text(text, settings)
    if not sk.shingles.size:
        raise RunError(f"{document} has no words to compare")
    index = BandIndex.open(run)
    _, found, est = index.lookup(sk.minhash[None, :], 0.0)
    if not found.size:
        return []
    with open_run(run) as con:
        con.register("wanted", pa.table({"doc_id": pa.array(found, pa.int64())}))
        rows = con.sql(
            "SELECT p.doc_id, p.url, t.text FROM pages AS p JOIN page_text AS t USING (doc_id)"
            " WHERE p.doc_id IN (SELECT doc_id FROM wanted)"
        ).fetchall()
    resemblance = dict(zip(found.tolist(), est.tolist(), strict=True))
    hits = []
    for doc_id, url, page_text in rows:  # candidates only: a handful, not the crawl
        contained = float(containment(sk.shingles, shingle_set(page_text, settings)))
        r = resemblance[doc_id]
        if r >= threshold or contained >= threshold:
            hits.append({"url": url, "doc_id": doc_id, "resemblance": r, "containment": contained})
    return sorted(hits, key=lambda h: (-max(h["resemblance"], h["containment"]), h["url"]))[:limit]
