"""Lost and found, and on-the-fly resemblance queries, over a store of crawls.

Lost and found (Broder et al. 1997, §4): where did the content of a URL gone from the latest
crawl move to? On-the-fly resemblance: which pages of a crawl does a document resemble or sit
inside? Both look a min-hash signature up in a crawl's band index (`band_index.py`) instead of
scanning again, so one question costs a few binary searches, not a pass over the crawl. A
crawl's pages and signatures are read where they lie, from an embedded run's files or a Spark
run's Parquet datasets (`signatures.RunSignatures`).
"""

from __future__ import annotations

import mimetypes
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from neardup.api import shingle_set
from neardup.crawls.band_index import BandIndex
from neardup.crawls.signatures import CHUNK, RunSignatures
from neardup.crawls.store import StoreError, crawl_dir, list_crawls
from neardup.ingest.extract import extract_page
from neardup.ingest.record import RawRecord
from neardup.kernels import containment, sketch_text
from neardup.store import load_settings, sql_path
from neardup.store.run import RunError, open_run


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
    """One page's signature, read from either layout of its crawl."""
    signatures = RunSignatures(run)
    try:
        return signatures.of_docs([doc_id])[0]
    except RunError:
        raise StoreError(f"document {doc_id} of {run} has no signature") from None


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
    new_doc, best = _best_matches(
        RunSignatures(prev), gone["doc_id"].to_numpy(), BandIndex.open(latest), threshold
    )
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


def _best_matches(
    signatures: RunSignatures, docs: np.ndarray, index: BandIndex, threshold: float
) -> tuple[np.ndarray, np.ndarray]:
    """(doc_id, resemblance) of the best match in `index` of each of `docs` (-1 and NaN where
    none reaches `threshold`). The queries go `CHUNK` at a time in doc order, so their
    signatures, read from either layout, are never all held at once."""
    new_doc = np.full(docs.size, -1, dtype=np.int64)
    best = np.full(docs.size, np.nan)
    by_doc = np.argsort(docs, kind="stable")
    for start in range(0, docs.size, CHUNK):
        part = by_doc[start : start + CHUNK]
        qi, found, est = index.lookup(signatures.of_docs(docs[part]), threshold)
        order = np.lexsort((-est, qi))  # best match first within each query
        qi, found, est = qi[order], found[order], est[order]
        first = np.unique(qi, return_index=True)[1]
        new_doc[part[qi[first]]] = found[first]
        best[part[qi[first]]] = est[first]
    return new_doc, best


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
    reaches `threshold`. A crawl scanned without its text (`--no-text`) has no containment
    to give (None): its candidates are kept by their resemblance alone."""
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
            kept = load_settings(crawl_dir(store, label)).keep_text
            why = "" if kept else f" (crawl {label} was scanned with --no-text: give a file)"
            raise StoreError(f"{document} has no stored text{why}")
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
            "SELECT p.doc_id, p.url, t.text FROM pages AS p LEFT JOIN page_text AS t "
            "USING (doc_id) WHERE p.doc_id IN (SELECT doc_id FROM wanted)"
        ).fetchall()
    resemblance = dict(zip(found.tolist(), est.tolist(), strict=True))
    hits = []
    for doc_id, url, page_text in rows:  # candidates only: a handful, not the crawl
        contained = None  # a crawl scanned with --no-text has no text to compare
        if page_text is not None:
            contained = float(containment(sk.shingles, shingle_set(page_text, settings)))
        r = resemblance[doc_id]
        if r >= threshold or (contained or 0.0) >= threshold:
            hits.append({"url": url, "doc_id": doc_id, "resemblance": r, "containment": contained})
    best = sorted(hits, key=lambda h: (-max(h["resemblance"], h["containment"] or 0.0), h["url"]))
    return best[:limit]
