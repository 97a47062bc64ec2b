"""`POST /pages` as an Arrow IPC stream: a batch of pages as columns, with no JSON object per
page to encode, decode and validate.

Why: at 1,000 web-like pages a batch (2.8 MB), the JSON form costs the client about 5 ms to
encode and the server about 8 ms to decode and validate (one dict and one pydantic model a
page), on a machine whose two cores also sketch the pages; the same batch as an Arrow stream
(columns url, text, html, redirect_to, links_in) is encoded in under 1 ms and read, checked
and turned into updates in under 1 ms (`bench/service_scale.py --body-cost`; figures in
docs/service.md). NDJSON was measured too and left out: a JSON object a line keeps both
costs (a parse and a model per page).

One set of rules: a stream is taken on the fast path only when whole-column checks prove
that the JSON form's model (`api_models.PagesIn`) would take every row (exactly one of
text, html, redirect_to or links_in alone; URLs of 1..8192 characters; valid UTF-8;
links_in in [0, MAX_LINKS]; only the five columns). Anything else, a wrong type, a
null URL, an unknown column, goes row by row through that model, so a refused row gets the
JSON form's status and error, its `loc` naming the row (`["body", "pages", 17,
"links_in"]`). A null is an absent field, in any column (an unknown column is refused
in the rows that give it a value, as JSON refuses an unknown key). The index's own rules
(404, 409) are `ServiceIndex.apply`'s, as for JSON.

A stream that is no Arrow IPC stream, or whose buffers do not hold what its metadata says,
is a 422 naming the stream. Compressed streams (LZ4, ZSTD buffers) are refused before any
buffer is read: the door's body cap bounds what the server holds only while the body is
read as it came, and a few megabytes of ZSTD can claim gigabytes.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from fastapi.exceptions import RequestValidationError
from pydantic import TypeAdapter, ValidationError

from neardup.index.state.updates import MAX_LINKS, PageUpdate
from neardup.service.api_models import MAX_BATCH, MAX_URL, PagesIn, page_updates

ARROW_STREAM = "application/vnd.apache.arrow.stream"
COLUMNS = ("url", "text", "html", "redirect_to", "links_in")
CONTENT = ("text", "html", "redirect_to")
_STRINGS = (pa.string(), pa.large_string())
_PAGES = TypeAdapter(PagesIn)
# What a client sends: the five columns, so a batch of text pages still states html,
# redirect_to and links_in as null.
SCHEMA = pa.schema(
    [("url", pa.string()), *((c, pa.string()) for c in CONTENT), ("links_in", pa.int64())]
)
# Arrow's Message flatbuffer: MessageHeader union tags and the field slots read below.
_DICTIONARY_BATCH, _RECORD_BATCH = 2, 3


def arrow_body(pages: Iterable[Mapping[str, Any]]) -> bytes:
    """A `POST /pages` body for `pages` (dicts with the JSON form's keys): what a Python
    client (`bench/service_scale.py`, the tests) sends instead of `{"pages": [...]}`."""
    rows = list(pages)
    unknown = {k for row in rows for k in row} - set(COLUMNS)
    if unknown:  # from_pylist would drop them without a word
        raise ValueError(f"unknown page fields: {', '.join(sorted(unknown))}")
    table = pa.Table.from_pylist(rows, schema=SCHEMA)
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, SCHEMA) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def read_arrow_pages(body: bytes) -> list[PageUpdate]:
    """The updates of an Arrow IPC stream body, in row order, checked by the JSON form's
    rules; `RequestValidationError` (a 422 with the usual error body) when any row or the
    stream itself is refused."""
    table = _read_table(body)
    if table.num_rows > MAX_BATCH:
        raise _refused(
            ("body", "pages"),
            f"List should have at most {MAX_BATCH} items after validation, not {table.num_rows}",
            "too_long",
        )
    try:
        _check_buffers(table)
        if _fast_path_holds(table):
            n = table.num_rows
            cols = [
                table.column(c).to_pylist() if c in table.column_names else [None] * n
                for c in COLUMNS
            ]
            return list(map(PageUpdate, *cols))
        return _row_by_row(table)
    except (pa.ArrowException, ValueError, TypeError, OverflowError) as err:
        # a stream that reads but holds what no page can be (a nested field name that is
        # not UTF-8, a timestamp in an unknown zone): the stream's fault, not a row's
        raise _refused(("body",), f"unreadable Arrow stream: {_first_line(err)}") from None


def _read_table(body: bytes) -> pa.Table:
    """The stream's record batches as one table; its buffers are checked in full by
    `_check_buffers` before any value is read."""
    try:
        compressed = _compressed(body)
        table = None if compressed else pa.ipc.open_stream(body).read_all()
        names = [] if table is None else table.column_names  # may not be UTF-8
    except (pa.ArrowException, OSError, ValueError, struct.error) as err:
        raise _refused(("body",), f"not an Arrow IPC stream: {_first_line(err)}") from None
    if table is None:
        raise _refused(("body",), "compressed Arrow buffers (LZ4, ZSTD) are not taken")
    twice = sorted({c for c in names if names.count(c) > 1})
    if twice:
        raise _refused(("body",), f"column given twice: {', '.join(twice)}")
    return table


def _check_buffers(table: pa.Table) -> None:
    """Every buffer consistent (`validate(full=True)`), and every string valid UTF-8: a bad
    string is named by row, as the JSON form names a lone surrogate; a bad buffer is a bad
    stream."""
    errors: list[dict[str, Any]] = []
    for name, col in zip(table.column_names, table.columns, strict=True):
        try:
            col.validate(full=True)
            continue
        except pa.ArrowException as err:
            problem = err
        if col.type not in _STRINGS:
            raise _refused(("body",), f"column {name}: {_first_line(problem)}")
        binary = pa.binary() if col.type == pa.string() else pa.large_binary()
        # the same buffers seen as bytes (no copy, no value read): valid unless UTF-8 is not
        as_bytes = pa.chunked_array([c.view(binary) for c in col.chunks], binary)
        try:
            as_bytes.validate(full=True)
        except pa.ArrowException:
            raise _refused(("body",), f"column {name}: {_first_line(problem)}") from None
        for row, raw in enumerate(as_bytes.to_pylist()):
            try:
                if raw is not None:
                    raw.decode("utf-8")
            except UnicodeDecodeError:
                errors.append(
                    {
                        "type": "string_unicode",
                        "loc": ("body", "pages", row, name),
                        "msg": "Input should be a valid string, unable to parse raw data "
                        "as a unicode string",
                        "input": None,
                    }
                )
    if errors:
        raise RequestValidationError(errors)


def _fast_path_holds(table: pa.Table) -> bool:
    """True when `PagesIn` would take every row: checked on whole columns, no row read."""
    names = set(table.column_names)
    if "url" not in names or not names <= set(COLUMNS):
        return False
    for name in ("url", *CONTENT):
        if name in names and table.column(name).type not in (*_STRINGS, pa.null()):
            return False
    links = table.column("links_in") if "links_in" in names else None
    if links is not None and not (pa.types.is_integer(links.type) or links.type == pa.null()):
        return False
    url = table.column("url")
    if url.null_count or not _lengths_within(url):
        return False
    given = np.zeros(len(table), np.int8)
    for name in CONTENT:
        if name in names:
            given += pc.is_valid(table.column(name)).to_numpy()
    alone = given == 0
    if links is not None:
        alone &= pc.is_valid(links).to_numpy()
    else:
        alone[:] = False
    if not ((given == 1) | alone).all():
        return False
    if "redirect_to" in names and not _lengths_within(table.column("redirect_to")):
        return False
    if links is not None and links.null_count < len(links) and links.type != pa.null():
        low, high = pc.min_max(links).values()
        if low.as_py() < 0 or high.as_py() > MAX_LINKS:
            return False
    return True


def _lengths_within(col: pa.ChunkedArray) -> bool:
    """Every non-null string of 1..MAX_URL characters (what `Url` allows)."""
    if col.type == pa.null() or col.null_count == len(col):
        return True
    low, high = pc.min_max(pc.utf8_length(col)).values()
    return low.as_py() >= 1 and high.as_py() <= MAX_URL


def _row_by_row(table: pa.Table) -> list[PageUpdate]:
    """Each row as the JSON object it stands for (its nulls left out), through the JSON
    form's model: its errors, its updates."""
    rows = [{k: v for k, v in row.items() if v is not None} for row in table.to_pylist()]
    try:
        body = _PAGES.validate_python({"pages": rows})
    except ValidationError as err:
        raise RequestValidationError(
            [{**e, "loc": ("body", *e["loc"])} for e in err.errors()]
        ) from None
    return page_updates(body.pages)


def _compressed(body: bytes) -> bool:
    """True when a record or dictionary batch of the stream has compressed buffers; reads
    only the messages' metadata (Arrow's `Message` flatbuffer), no buffer."""
    reader = pa.ipc.MessageReader.open_stream(body)
    while True:
        try:
            message = reader.read_next_message()
        except StopIteration:
            return False
        meta = message.metadata.to_pybytes()
        msg = _u32(meta, 0)  # the root table
        kind = _field(meta, msg, 1, "<B")
        header = _ref(meta, msg, 2)
        if kind == _DICTIONARY_BATCH and header is not None:
            header = _ref(meta, header, 1)  # DictionaryBatch.data: a RecordBatch
        elif kind != _RECORD_BATCH:
            continue
        if header is not None and _slot(meta, header, 3):  # RecordBatch.compression
            return True


def _u32(buf: bytes, at: int) -> int:
    return int(struct.unpack_from("<I", buf, at)[0])


def _slot(buf: bytes, table: int, index: int) -> int:
    """The offset of field `index` inside a flatbuffer table (0: absent)."""
    vtable = table - struct.unpack_from("<i", buf, table)[0]
    size = struct.unpack_from("<H", buf, vtable)[0]
    pos = 4 + 2 * index
    return 0 if pos + 2 > size else int(struct.unpack_from("<H", buf, vtable + pos)[0])


def _field(buf: bytes, table: int, index: int, fmt: str) -> int:
    off = _slot(buf, table, index)
    return int(struct.unpack_from(fmt, buf, table + off)[0]) if off else 0


def _ref(buf: bytes, table: int, index: int) -> int | None:
    """The table a field points to, or None when the field is absent."""
    off = _slot(buf, table, index)
    return table + off + _u32(buf, table + off) if off else None


def _refused(loc: tuple[str | int, ...], msg: str, kind: str = "arrow_invalid") -> Exception:
    return RequestValidationError([{"type": kind, "loc": loc, "msg": msg, "input": None}])


def _first_line(err: BaseException) -> str:
    return (str(err).strip().splitlines() or [type(err).__name__])[0]
