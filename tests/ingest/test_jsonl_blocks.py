"""JSONL read in blocks of lines and parsed by orjson gives exactly the records that reading
line by line with `json.loads` gives: every line accounted for, the same skip reasons, the
same values, wherever the block boundaries fall."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from neardup.ingest import tables
from neardup.ingest.limits import raw_cap, too_large_reason
from neardup.ingest.record import RawRecord
from neardup.ingest.tables import (
    LineBlock,
    block_records,
    iter_jsonl,
    iter_jsonl_blocks,
    row_record,
)

CAP = 4096  # max_payload_bytes in these tests; lines over raw_cap(CAP) are skipped unread


def reference_records(path: Path, max_payload_bytes: int = CAP) -> list[RawRecord]:
    """The reader as it was before blocks: `readline` and `json.loads`, line by line."""
    cap = raw_cap(max_payload_bytes)
    raw = open(path, "rb")  # noqa: SIM115 - closed by the with below
    fh = gzip.GzipFile(fileobj=raw, mode="rb") if raw.peek(2)[:2] == b"\x1f\x8b" else raw
    out: list[RawRecord] = []
    line_no = -1
    src = str(path)
    try:
        with raw, fh:
            while line := fh.readline(cap + 1):
                line_no += 1
                if len(line) > cap and not line.endswith(b"\n"):
                    while (piece := fh.readline(1 << 20)) and not piece.endswith(b"\n"):
                        pass
                    reason = too_large_reason(max_payload_bytes)
                    out.append(RawRecord(src, line_no, "row", skipped_reason=reason))
                elif line.strip():
                    out.append(_reference_row(src, line_no, line, max_payload_bytes))
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        out.append(RawRecord(src, line_no + 1, "row", skipped_reason=f"unreadable file: {exc}"))
    return out


def _reference_row(path: str, line_no: int, line: bytes, max_payload_bytes: int) -> RawRecord:
    try:
        row = json.loads(line)
    except RecursionError:
        return RawRecord(path, line_no, "row", skipped_reason="bad JSON line: nested too deeply")
    except (ValueError, UnicodeDecodeError) as exc:
        return RawRecord(path, line_no, "row", skipped_reason=f"bad JSON line: {exc}"[:160])
    if not isinstance(row, dict):
        return RawRecord(path, line_no, "row", skipped_reason="bad row: not a JSON object")
    return row_record(path, line_no, row, max_payload_bytes)


def write(path: Path, lines: list[bytes], end: bytes = b"\n", gz: bool = False) -> Path:
    data = b"\n".join(lines) + end
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


def good(i: int, text: str = "some words of text") -> bytes:
    return json.dumps({"url": f"http://a.example/{i}", "text": f"{text} {i}"}).encode()


@pytest.fixture(params=[1 << 20, 97, 1], ids=["big-blocks", "small-blocks", "byte-blocks"])
def block_bytes(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Blocks of every size, so that lines start and end on both sides of block edges."""
    monkeypatch.setattr(tables, "BLOCK_BYTES", request.param)
    return int(request.param)


def test_a_bad_line_in_a_block_is_one_row_and_the_rest_are_read(
    tmp_path: Path, block_bytes: int
) -> None:
    lines = [good(i) for i in range(50)]
    lines[23] = b'{"url": "http://a.example/23", "text": "cut short'
    path = write(tmp_path / "t.jsonl", lines)
    records = list(iter_jsonl(str(path), CAP))
    assert [r.offset for r in records] == list(range(50))
    assert [r.offset for r in records if r.skipped_reason] == [23]
    assert (records[23].skipped_reason or "").startswith("bad JSON line")
    assert records[24].text == "some words of text 24"
    assert records == reference_records(path)


HOSTILE = [
    b'{"url": "http://a/1", "text": "one", "status": 1e999}',
    b'{"url": "http://a/2", "text": "two", "status": 1' + b"0" * 30 + b"}",
    b'{"url": "http://a/3", "text": "three", "id": 18446744073709551616}',
    b'{"url": "http://a/4", "text": "four", "id": -9223372036854775809}',
    b'{"url": "http://a/5", "text": "five", "id": 1.0, "status": 200.0}',
    b'{"url": "http://a/6", "text": "six", "id": [1, 18446744073709551617]}',
    b'{"url": "http://a/7", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"url": "http://a/8", "text": "deep", "x": ' + b"[" * 990 + b"]" * 990 + b"}",
    b'{"url": "http://a/9", "text": "shallow", "x": ' + b"[" * 40 + b"]" * 40 + b"}",
    b'{"url": "http://a/10\xff", "text": "bad utf-8"}',
    b'{"url": "http://a/11", "text": "lone \\ud800 surrogate"}',
    b'{"url": "http://a/12", "text": "pair \\ud83d\\ude00 ok"}',
    b'{"url": "http://a/13", "text": NaN}',
    b'\xef\xbb\xbf{"url": "http://a/14", "text": "after a byte order mark"}',
    b'{"url": "http://a/15", "text": "dup", "text": "last wins"}',
    b'{"url": "http://a/16", "text": "crlf line"}\r',
    b"   \t ",
    b"",
    b"[1, 2]",
    b'"just a string"',
    '{"url": "http://a/21", "text": "été 中文 😀"}'.encode(),
    b'{"url": "http://a/22", "text": "tab\tinside"}',
    b'{"url": "http://a/23", "text": 5, "html": "<p>html wins</p>"}',
    b'{"url": "  http://a/24  ", "text": "padded url", "fetched_at": "2024-03-01T10:00:00+01:00"}',
    b'{"url": "http://a/25", "text": "t", "status": "404", "id": true}',
    b'{"url": "http://a/26", "text": "t", "status": -0, "id": "\\u0000"}',
    b'{"url": "http://a/27", "text": "t", "fetched_at": {"nested": 1}}',
    b'{"url": "http://a/28", "text": "t"',
    b'{"url": "http://a/29", "text": "the last line, without a newline"}',
]


def test_hostile_and_odd_lines_match_the_line_reader(tmp_path: Path, block_bytes: int) -> None:
    path = write(tmp_path / "odd.jsonl", HOSTILE, end=b"")
    records = list(iter_jsonl(str(path), 1 << 20))
    assert records == reference_records(path, 1 << 20)
    assert len(records) == len(HOSTILE) - 2  # the two blank lines
    by_url = {r.url: r for r in records if r.url}
    assert by_url["http://a/3"].record_id == "18446744073709551616"
    assert by_url["http://a/5"].record_id == "1.0" and by_url["http://a/5"].status == 200
    assert by_url["http://a/15"].text == "last wins"
    assert by_url["http://a/21"].text == "été 中文 😀"
    assert by_url["http://a/9"].skipped_reason is None
    assert by_url["http://a/29"].skipped_reason is None


def test_over_long_lines_are_skipped_unread_across_blocks(tmp_path: Path, block_bytes: int) -> None:
    huge = json.dumps({"url": "http://a/huge", "text": "w " * 10_000}).encode()
    lines = [good(0), huge, good(2), huge, huge, good(5), b"", huge]
    path = write(tmp_path / "long.jsonl", lines, end=b"")
    records = list(iter_jsonl(str(path), CAP))
    assert records == reference_records(path)
    reason = too_large_reason(CAP)
    assert [(r.offset, r.skipped_reason) for r in records] == [
        (0, None),
        (1, reason),
        (2, None),
        (3, reason),
        (4, reason),
        (5, None),
        (7, reason),
    ]


def test_a_line_just_at_the_cap_is_read(tmp_path: Path) -> None:
    cap = raw_cap(CAP)
    head = b'{"url": "http://a/1", "text": "'
    exact = head + b"x" * (cap - len(head) - 2) + b'"}'
    over = head + b"x" * (cap - len(head) - 1) + b'"}'
    assert len(exact) == cap and len(over) == cap + 1
    path = write(tmp_path / "edge.jsonl", [exact, over, exact], end=b"")
    records = list(iter_jsonl(str(path), CAP))
    assert records == reference_records(path)
    # The text is over max_payload_bytes, so every row is a skip; but only the line over
    # the cap is skipped unread, without its URL.
    assert [r.url for r in records] == ["http://a/1", None, "http://a/1"]


@pytest.mark.parametrize("cut", [10, 200, 2000])
def test_truncated_gzip_keeps_every_whole_line(tmp_path: Path, cut: int, block_bytes: int) -> None:
    lines = [good(i, "text " * (i % 7)) for i in range(400)]
    data = gzip.compress(b"\n".join(lines) + b"\n")
    path = tmp_path / "cut.jsonl.gz"
    path.write_bytes(data[: len(data) - cut])
    records = list(iter_jsonl(str(path), CAP))
    assert records == reference_records(path)
    assert (records[-1].skipped_reason or "").startswith("unreadable file")
    assert [r.offset for r in records] == list(range(len(records)))


def test_blocks_hold_whole_lines_and_count_them(tmp_path: Path, block_bytes: int) -> None:
    lines = [good(i) for i in range(30)] + [b"", b"  "] + [good(i) for i in range(30, 40)]
    path = write(tmp_path / "b.jsonl", lines)
    items = list(iter_jsonl_blocks(str(path), CAP))
    blocks = [item for item in items if isinstance(item, LineBlock)]
    assert len(blocks) == len(items)
    assert b"".join(b.data for b in blocks) == path.read_bytes()
    line = 0
    for block in blocks:
        assert block.first_line == line and block.data.endswith(b"\n")
        line += block.data.count(b"\n")
    records = [r for b in blocks for r in block_records(b, CAP)]
    assert [r.offset for r in records] == [*range(30), *range(32, 42)]


def test_progress_reaches_the_file_size(tmp_path: Path, block_bytes: int) -> None:
    path = write(tmp_path / "p.jsonl", [good(i) for i in range(100)])
    seen: list[int] = []
    list(iter_jsonl(str(path), CAP, on_read=seen.append))
    assert seen and seen == sorted(seen) and seen[-1] == path.stat().st_size


_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=8,
)
_ROWS = st.dictionaries(
    st.sampled_from(["url", "text", "html", "id", "status", "fetched_at", "other"]),
    _VALUES,
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=st.lists(_ROWS, max_size=12), junk=st.lists(st.binary(max_size=12), max_size=3))
def test_any_rows_match_the_line_reader(
    tmp_path: Path, rows: list[dict], junk: list[bytes]
) -> None:
    lines = [json.dumps(row).encode() for row in rows]
    lines += [j.replace(b"\n", b" ") for j in junk]
    path = write(tmp_path / "h.jsonl", lines)
    assert list(iter_jsonl(str(path), 1 << 20)) == reference_records(path, 1 << 20)
