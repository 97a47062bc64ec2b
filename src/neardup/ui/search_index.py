"""The web UI's word search: a SQLite FTS5 index of a run's pages, built once per run.

Why an index: the search used to be ILIKE over `page_text`, which reads every text of the
run for a query whose words are rare or never together: 12 to 33 s at a million pages. An
inverted index answers in milliseconds, and FTS5 comes with Python's `sqlite3` (no download,
no service). Measured on 1 M web-like pages (docs/benchmarks.md): `unicode61` with
`detail=full` indexes 2.7 GB of text in about 100 s into a file half its size; the `trigram`
tokenizer, which would have kept ILIKE's any-substring matching, indexed 7 times slower into
a file 4 times the size of the text (20,000 pages), so search matches words, as search
engines do:

- a query word matches the same word in the text, whatever its case: letters and digits
  make words, everything else separates them (`unicode61`, accents kept, so "café" is not
  "cafe"); a query word holding separators ("tarfile.open", "e-mail") matches those words
  one after the other (a phrase);
- a word ending in `*` matches the words that start with it ("sock*": socket, sockets),
  given three letters or digits before the `*` (else it is searched as a whole word, and
  the answer says so);
- a page matches when its text holds every word; words with no letter or digit are ignored;
- the pages whose title holds every word come first (those whose URL holds them too before
  the others), then those whose URL does, then the rest, each group in crawl order
  (`doc_id`): the order of the ILIKE search before it, stable for paging, and needing no
  scoring of every hit (a common word at a million pages would take seconds to rank).

The index is built when a run is first opened in the UI (`ensure_index`, with a progress
callback), written to a hidden temporary name beside its final one and renamed into place
once complete, so a killed build never leaves a half index under the name that is read. It
records a stamp of what it was built from (the text and pages files' sizes and times and the
run's summary); an index whose stamp differs, or that cannot be read, is rebuilt. It lives in
the run directory, or when that is read-only, in neardup's cache folder.
"""

from __future__ import annotations

import hashlib
import os
import re
import sqlite3
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import closing, suppress
from dataclasses import dataclass
from itertools import chain, islice
from pathlib import Path

import duckdb
import numpy as np

from neardup.cache_folder import cache_dir
from neardup.pipeline.progress import Progress, SilentProgress
from neardup.store import RunError

INDEX_NAME = "search-index.sqlite"
FORMAT = "2"  # change when the schema, tokenizer or what is indexed changes: forces a rebuild
TOKENIZE = "unicode61 remove_diacritics 0"
BUILD_BATCH = 2048  # rows handed to SQLite at a time while building
# Shorter prefixes match so many words that FTS5 merges most of the index for them: 2.8 s
# for "a*" at a million pages, 0.4 s for "the*".
MIN_PREFIX = 3
PROBE_BATCH = 500  # candidate rowids probed against the text hits per statement
PROBE_MAX = 20_000  # title and URL candidates beyond which one walk over the hits is cheaper
STAMPED = ("pages.parquet", "page_text.parquet", "summary.json")
_WORD = re.compile(r"[^\W_]+")  # letters and digits: unicode61's token characters


def words(text: str) -> list[str]:
    """The words of `text` as the index sees them, lower-cased."""
    return _WORD.findall(text.lower())


@dataclass(frozen=True)
class Query:
    """A text search: each term is the words of one query word, and whether it is a prefix."""

    terms: tuple[tuple[tuple[str, ...], bool], ...]
    notes: tuple[str, ...] = ()

    @classmethod
    def parse(cls, q: str) -> Query:
        """The terms of `q`, with a note for each word not searched as written."""
        terms, notes = [], []
        for raw in q.split():
            prefix = raw.endswith("*")
            parts = tuple(words(raw))
            if not parts:
                notes.append(f"{raw!r} has no letter or digit: left out")
                continue
            if prefix and len(parts[-1]) < MIN_PREFIX:
                notes.append(
                    f"{raw!r}: a prefix needs {MIN_PREFIX} letters or digits before the *; "
                    "searched as a whole word"
                )
                prefix = False
            terms.append((parts, prefix))
        return cls(tuple(terms), tuple(notes))

    def __bool__(self) -> bool:
        return bool(self.terms)

    @property
    def has_prefix(self) -> bool:
        return any(prefix for _, prefix in self.terms)

    def match(self, column: str) -> str:
        """The FTS5 expression: every term in `column` (each a quoted phrase)."""
        return " AND ".join(
            f'{column}:"{" ".join(parts)}"{"*" if prefix else ""}' for parts, prefix in self.terms
        )

    def pattern(self, index: int = 0) -> re.Pattern[str]:
        """A regular expression finding term `index` in a text (for snippets and tests)."""
        parts, prefix = self.terms[index]
        body = r"[\W_]+".join(re.escape(p) for p in parts)
        end = "" if prefix else r"(?![^\W_])"
        return re.compile(rf"(?<![^\W_]){body}{end}", re.IGNORECASE)

    def matches(self, text: str) -> bool:
        """Whether `text` holds every term: the definition the index implements."""
        return all(self.pattern(i).search(text) for i in range(len(self.terms)))


def stamp(run: Path) -> str:
    """What an index of `run` was built from: the files' sizes and modification times (a
    table stored as a folder of parts: each part's) and the summary's bytes."""
    h = hashlib.sha256(f"{FORMAT} {TOKENIZE}".encode())
    for name in STAMPED:
        path = run / name
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file():
                st = f.stat()
                h.update(f"{f.relative_to(run)} {st.st_size} {st.st_mtime_ns}\n".encode())
    summary = run / "summary.json"
    if summary.is_file():
        h.update(summary.read_bytes())
    return h.hexdigest()


def connect(path: Path) -> sqlite3.Connection:
    """A read-only connection to a finished index (immutable: it is replaced, never edited)."""
    return sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)


def _stamp_of(path: Path) -> str | None:
    """The stamp a finished index records, or None for a missing or unreadable file."""
    if not path.is_file():
        return None
    try:
        with closing(connect(path)) as db:
            row = db.execute("SELECT value FROM meta WHERE key = 'stamp'").fetchone()
    except sqlite3.Error:
        return None
    return row[0] if row else None


def places(run: Path, cache: Path | None) -> list[Path]:
    """Where an index of `run` may be, in the order they are looked at: the run directory,
    `cache` (given by the caller), neardup's cache folder (one folder per run path)."""
    found = [run]
    if cache is not None:
        found.append(cache)
    user = cache_dir()
    if user is not None:
        key = hashlib.sha256(str(run.resolve()).encode()).hexdigest()[:16]
        found.append(user / "ui-search" / key)
    return found


def ensure_index(
    run: Path,
    con: duckdb.DuckDBPyConnection,
    cache: Path | None = None,
    progress: Progress | None = None,
) -> Path:
    """The path of an up-to-date search index of `run`, building it first if none is.

    Built in the first writable place of `places()` (a temporary folder if none is)."""
    want = stamp(run)
    candidates = places(run, cache)
    for place in candidates:
        if _stamp_of(place / INDEX_NAME) == want:
            return place / INDEX_NAME
    for place in candidates:
        try:
            place.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if os.access(place, os.W_OK):
            break
    else:
        place = Path(tempfile.mkdtemp(prefix="neardup-ui-search-"))
    target = place / INDEX_NAME
    build(con, target, want, progress)
    return target


def _remove_abandoned(target: Path) -> None:
    """Delete the temporary files of builds that were killed (their process is gone)."""
    for tmp in target.parent.glob(f".{target.name}.*.tmp"):
        pid = tmp.name.removeprefix(f".{target.name}.").removesuffix(".tmp")
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            tmp.unlink(missing_ok=True)
        except (ValueError, PermissionError):
            continue


def build(
    con: duckdb.DuckDBPyConnection, target: Path, run_stamp: str, progress: Progress | None = None
) -> None:
    """Index every compared page's text, and its title and URL, into `target`, atomically.

    Written under a temporary name and renamed into place: a crash leaves only that file,
    deleted by the next build; a build that fails (a full disk) removes it and says why in
    a `RunError`, which the CLI prints in one line."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        _remove_abandoned(target)
        tmp.unlink(missing_ok=True)
        _write(con, tmp, run_stamp, progress or SilentProgress())
        os.replace(tmp, target)
    except BaseException as err:
        with suppress(OSError):
            tmp.unlink(missing_ok=True)
        if isinstance(err, sqlite3.Error | OSError):
            raise RunError(f"cannot build the search index in {target.parent}: {err}") from err
        raise


def _write(con: duckdb.DuckDBPyConnection, tmp: Path, run_stamp: str, progress: Progress) -> None:
    """The index itself: two contentless FTS5 tables (the texts stay in the run; the index
    holds only the inverted lists) without column sizes (nothing is ranked by BM25), written
    without a journal, then merged into one segment each."""
    started = time.perf_counter()
    total = con.execute("SELECT count(*) FROM page_text").fetchall()[0][0]
    db = sqlite3.connect(tmp)
    try:
        db.execute("PRAGMA journal_mode = OFF")
        db.execute("PRAGMA synchronous = OFF")
        db.execute("PRAGMA cache_size = -262144")  # 256 MiB
        for table, columns in (("texts", "text"), ("heads", "title, url")):
            db.execute(
                f"CREATE VIRTUAL TABLE {table} USING fts5({columns}, content='', "
                f"columnsize=0, detail=full, tokenize='{TOKENIZE}')"
            )
        db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        # Titles and URLs of all pages (small columns), looked up by position for each batch
        # of texts: a join in DuckDB would buffer texts ahead of this loop (GBs at 1 M pages).
        heads = con.sql(
            "SELECT doc_id, coalesce(title, '') AS title, coalesce(url, '') AS url "
            "FROM pages ORDER BY doc_id"
        ).to_arrow_table()
        ids = heads["doc_id"].to_numpy()
        reader = con.sql("SELECT doc_id, text FROM page_text").to_arrow_reader(BUILD_BATCH)
        done = 0
        progress.stage("search index", total)
        for batch in reader:
            doc_ids = batch["doc_id"].to_numpy()
            at = heads.take(np.minimum(np.searchsorted(ids, doc_ids), len(ids) - 1))
            if not np.array_equal(at["doc_id"].to_numpy(), doc_ids):
                raise RunError("page_text holds a doc_id that pages does not: a damaged run")
            rowids = doc_ids.tolist()
            db.executemany(
                "INSERT INTO texts (rowid, text) VALUES (?, ?)",
                zip(rowids, batch["text"].to_pylist(), strict=True),
            )
            db.executemany(
                "INSERT INTO heads (rowid, title, url) VALUES (?, ?, ?)",
                zip(rowids, at["title"].to_pylist(), at["url"].to_pylist(), strict=True),
            )
            done += batch.num_rows
            progress.advance(batch.num_rows)
        for table in ("texts", "heads"):
            db.execute(f"INSERT INTO {table} ({table}) VALUES ('optimize')")
        progress.done()
        meta = {
            "format": FORMAT,
            "tokenize": TOKENIZE,
            "pages": str(done),
            "seconds": f"{time.perf_counter() - started:.1f}",
            "stamp": run_stamp,
        }
        db.executemany("INSERT INTO meta VALUES (?, ?)", meta.items())
        db.commit()
    finally:
        db.close()


def info(path: Path) -> dict[str, str]:
    """The index's meta rows (format, pages, build seconds, stamp)."""
    with closing(connect(path)) as db:
        return dict(db.execute("SELECT key, value FROM meta").fetchall())


def search(path: Path, query: Query, limit: int, offset: int) -> list[int]:
    """Doc IDs of hits `offset .. offset + limit` (at most), ranked as the module says.

    Titles and URLs have their own small table (`heads`): which pages' titles and URLs
    hold every word is read whole from it (few pages, usually), which splits the hits into
    four ranks without asking the big `texts` table to look at columns (a column filter on
    a common word reads its whole posting list: 0.12 s a rank at a million pages). Then
    either the title and URL candidates are probed against the text hits by rowid, in
    batches, and the rest of the text hits walked lazily in rowid order; or, for a prefix
    (which FTS5 expands again for each probe: seconds) or too many candidates, the text hits
    are walked once (`_one_walk`)."""
    with closing(connect(path)) as db:
        titled = _heads(db, query.match("title"))
        in_url = _heads(db, query.match("url"))
        text = query.match("text")
        if query.has_prefix or len(titled) + len(in_url) > PROBE_MAX:
            ranked: Iterable[int] = _one_walk(db, text, titled, in_url, offset + limit)
        else:
            ranked = chain(
                _probe(db, text, titled & in_url),
                _probe(db, text, titled - in_url),
                _probe(db, text, in_url - titled),
                (d for d in _hits(db, text) if d not in titled and d not in in_url),
            )
        return list(islice(ranked, offset, offset + limit))


def _heads(db: sqlite3.Connection, expr: str) -> set[int]:
    return {r[0] for r in db.execute("SELECT rowid FROM heads WHERE heads MATCH ?", [expr])}


def _hits(db: sqlite3.Connection, expr: str) -> Iterator[int]:
    """Text hits in rowid order, read as they are asked for."""
    for (doc_id,) in db.execute(
        "SELECT rowid FROM texts WHERE texts MATCH ? ORDER BY rowid", [expr]
    ):
        yield doc_id


def _probe(db: sqlite3.Connection, expr: str, candidates: set[int]) -> Iterator[int]:
    """The `candidates` that are text hits, in rowid order (about 20 µs a candidate)."""
    ordered = sorted(candidates)
    for i in range(0, len(ordered), PROBE_BATCH):
        batch = ordered[i : i + PROBE_BATCH]
        marks = ",".join("?" * len(batch))
        for (doc_id,) in db.execute(
            f"SELECT rowid FROM texts WHERE texts MATCH ? AND rowid IN ({marks}) ORDER BY rowid",
            [expr, *batch],
        ):
            yield doc_id


def _one_walk(
    db: sqlite3.Connection, expr: str, titled: set[int], in_url: set[int], want: int
) -> list[int]:
    """The first `want` ranked hits (or all), from one walk over the text hits: every
    candidate is seen once the walk passes the last of them, and from there every hit
    is of the last rank, so the walk stops when that rank holds `want`."""
    last = max(titled | in_url, default=-1)
    ranks: tuple[list[int], ...] = ([], [], [], [])
    for doc_id in _hits(db, expr):
        if doc_id > last and len(ranks[3]) >= want:
            break
        t, u = doc_id in titled, doc_id in in_url
        ranks[0 if t and u else 1 if t else 2 if u else 3].append(doc_id)
    return [d for rank in ranks for d in rank]
