"""Damaged and hostile input, one test per case seen in published crawls.

Each file is written the way crawlers write them (warcio), then damaged by hand, byte by byte.
The figure that must hold: every intact record is read, the damaged one is a row with its
reason, nothing raises, nothing hangs, and memory does not grow with the size of a record.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from damaged_warcs import MiB, bomb, lengthen, page, warc_level_bomb

from neardup.config import Settings, SettingsError
from neardup.ingest import iter_records
from neardup.ingest.arc_reader import iter_arc
from neardup.ingest.limits import MAX_REDIRECT_CHARS
from neardup.ingest.warc_framing import member_end
from neardup.ingest.warc_reader import iter_warc


def pages_read(rows) -> list[str]:
    """URLs of the rows that came out as readable pages."""
    return [r.url for r in rows if r.skipped_reason is None and r.payload]


@pytest.mark.parametrize("gz", [True, False], ids=["gzip", "plain"])
def test_a_length_past_its_record_costs_only_that_record(tmp_path: Path, gz: bool) -> None:
    records = [page(i) for i in range(7)]
    records[2] = lengthen(records[2], 500)  # runs into records 3 and 4
    path = tmp_path / ("x.warc.gz" if gz else "x.warc")
    path.write_bytes(b"".join(gzip.compress(r) if gz else r for r in records))
    rows = list(iter_warc(str(path)))
    assert len(rows) == 7
    assert pages_read(rows) == [f"http://example.com/{i}" for i in (0, 1, 3, 4, 5, 6)]
    assert "Content-Length runs past" in (rows[2].skipped_reason or "")


def test_the_last_record_swallowing_the_rest_is_found(tmp_path: Path) -> None:
    records = [page(i) for i in range(4)]
    records[1] = lengthen(records[1], 5000)  # runs past the end of the file
    path = tmp_path / "x.warc"
    path.write_bytes(b"".join(records))
    rows = list(iter_warc(str(path)))
    assert len(rows) == 4
    assert pages_read(rows) == [
        "http://example.com/0",
        "http://example.com/2",
        "http://example.com/3",
    ]


@pytest.mark.parametrize("gz", [True, False], ids=["gzip", "plain"])
def test_a_40_kib_header_costs_only_its_record(tmp_path: Path, gz: bool) -> None:
    records = [page(i) for i in range(5)]
    long_field = b"WARC-Type: response\r\nX-Note: " + b"a" * 40 * 1024 + b"\r\n"
    records[1] = records[1].replace(b"WARC-Type: response\r\n", long_field, 1)
    path = tmp_path / ("x.warc.gz" if gz else "x.warc")
    path.write_bytes(b"".join(gzip.compress(r) if gz else r for r in records))
    rows = list(iter_warc(str(path)))
    assert len(rows) == 5
    assert pages_read(rows) == [f"http://example.com/{i}" for i in (0, 2, 3, 4)]
    assert rows[1].skipped_reason and rows[1].skipped_reason.startswith("unreadable record")


def test_member_end_stops_on_damaged_and_trailing_data(tmp_path: Path) -> None:
    member = gzip.compress(b"x" * 200_000)
    path = tmp_path / "m.gz"
    path.write_bytes(member + b"junk after the member")
    with open(path, "rb") as fh:
        assert member_end(fh.fileno(), 0, path.stat().st_size) == len(member)
    path.write_bytes(member[: len(member) // 2])  # cut: no end
    with open(path, "rb") as fh:
        assert member_end(fh.fileno(), 0, path.stat().st_size) is None


@pytest.mark.timeout(120)  # a guard against a hang, not a timing
@pytest.mark.parametrize("gz", [True, False], ids=["gzip", "plain"])
def test_fuzzed_records_cost_only_themselves(tmp_path: Path, gz: bool) -> None:
    records = [gzip.compress(page(i)) if gz else page(i) for i in range(6)]
    rng = random.Random(7)
    path = tmp_path / "fuzz.warc"
    for _ in range(150):
        hit = rng.randrange(1, 6)
        damaged = bytearray(records[hit])
        for _ in range(rng.randint(1, 6)):
            i = rng.randrange(10 if gz else 0, len(damaged))
            damaged[i] = rng.randrange(256)
        path.write_bytes(b"".join(bytes(damaged) if j == hit else r for j, r in enumerate(records)))
        rows = list(iter_warc(str(path)))
        read = set(pages_read(rows))
        intact = {f"http://example.com/{j}" for j in range(6) if j != hit}
        assert intact <= read, f"lost {intact - read} with record {hit} damaged"
        assert len(rows) >= 6, f"record {hit} has no row"


_PEAK = """
import resource, sys
from neardup.ingest import iter_records
rows = [r.skipped_reason for r in iter_records([sys.argv[1]])]
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(len(rows), sum(r is None for r in rows), peak)
"""


def read_in_child(path: Path) -> tuple[int, int, int]:
    """(rows, rows without a skip reason, peak RSS in KiB) of reading `path` in a fresh process."""
    out = subprocess.run(
        [sys.executable, "-c", _PEAK, str(path)], capture_output=True, text=True, check=True
    )
    rows, good, peak = map(int, out.stdout.split())
    return rows, good, peak


def test_bombs_are_rows_and_memory_stays_flat(tmp_path: Path) -> None:
    clean = tmp_path / "clean.warc.gz"
    clean.write_bytes(b"".join(gzip.compress(page(i)) for i in range(3)))
    http_bomb = tmp_path / "http_bomb.warc.gz"
    encoded = [("Content-Type", "text/html"), ("Content-Encoding", "gzip")]
    records = [page(0), page(1, bomb(256 * MiB), encoded), page(2)]
    http_bomb.write_bytes(b"".join(gzip.compress(r) for r in records))
    body_bomb = tmp_path / "body_bomb.warc.gz"
    body_bomb.write_bytes(
        gzip.compress(page(0)) + warc_level_bomb(256 * MiB) + gzip.compress(page(2))
    )
    _, _, base = read_in_child(clean)
    for path in (http_bomb, body_bomb):
        rows, good, peak = read_in_child(path)
        assert (rows, good) == (3, 2)
        assert (peak - base) * 1024 < 200 * MiB, f"{path.name}: {(peak - base) // 1024} MiB"


def test_a_capped_body_is_a_row_and_the_next_record_is_read(tmp_path: Path) -> None:
    path = tmp_path / "x.warc.gz"
    big = b"<html><body>" + b"word " * 2000 + b"</body></html>"
    path.write_bytes(b"".join(gzip.compress(r) for r in (page(0), page(1, big), page(2))))
    rows = list(iter_warc(str(path), max_payload_bytes=4096))
    assert [r.skipped_reason for r in rows] == [None, "payload too large (over 4096 bytes)", None]


def test_arc_body_over_the_cap_is_a_row(tmp_path: Path) -> None:
    def arc(url: str, body: bytes) -> bytes:
        block = b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
        return b"%s 192.0.2.1 20080430204825 text/html %d\n%s\n" % (url.encode(), len(block), block)

    desc = b"filedesc://x.arc 0.0.0.0 20080430204825 text/plain 3\n1 \n\n"
    small = b"<html><body><p>small page</p></body></html>"
    data = (
        desc + arc("http://a/1", small) + arc("http://a/2", b"x" * 9000) + arc("http://a/3", small)
    )
    path = tmp_path / "x.arc"
    path.write_bytes(data)
    rows = list(iter_arc(str(path), max_payload_bytes=4096))
    assert [r.url for r in rows][1:] == ["http://a/1", "http://a/2", "http://a/3"]
    assert [r.skipped_reason for r in rows][1:] == [
        None,
        "payload too large (over 4096 bytes)",
        None,
    ]


def test_hostile_json_values_are_rows_with_reasons(tmp_path: Path) -> None:
    lines = [
        b'{"url": "http://a/1", "text": "one two", "status": 1e999}',
        b'{"url": "http://a/2", "text": "one two", "status": 1' + b"0" * 30 + b"}",
        b'{"url": "http://a/3", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        b'{"url": "http://a/4\xff", "text": "bad utf-8"}',
        b'{"url": "http://a/5", "text": "lone \\ud800 surrogate"}',
        b'{"url": "http://a/6", "text": "an intact row"}',
    ]
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    rows = list(iter_records([str(path)]))
    assert len(rows) == 6
    assert [r.url for r in rows if r.skipped_reason is None] == ["http://a/6"]
    assert all(r.skipped_reason for r in rows[:5])
    assert all(r.status is None for r in rows)
    for row in rows:  # every value can be written as UTF-8 (Parquet, DuckDB)
        json.dumps([row.url, row.skipped_reason], ensure_ascii=False).encode("utf-8")


def test_an_over_long_json_line_is_skipped_unread(tmp_path: Path) -> None:
    path = tmp_path / "rows.jsonl"
    big = json.dumps({"url": "http://a/big", "text": "w " * 5000}).encode()
    path.write_bytes(big + b"\n" + b'{"url": "http://a/ok", "text": "fine"}\n')
    rows = list(iter_records([str(path)], max_payload_bytes=2048))
    assert [r.skipped_reason for r in rows] == ["payload too large (over 2048 bytes)", None]
    assert rows[1].offset == 1


def test_odd_folder_entries_are_rows_with_reasons(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    clean = b"".join(gzip.compress(page(i)) for i in range(3))
    (crawl / "a.warc.gz").write_bytes(clean)
    weird = os.fsdecode(b"b\xff.warc.gz")  # not UTF-8
    (crawl / weird).write_bytes(clean)
    (crawl / "c.warc.gz").symlink_to(tmp_path / "gone.warc.gz")
    os.mkfifo(crawl / "d.warc.gz")
    rows = list(iter_records([str(crawl)]))
    assert len(rows) == 8
    assert len(pages_read(rows)) == 6
    reasons = [r.skipped_reason for r in rows if r.skipped_reason]
    assert reasons == ["unreadable entry: dangling symlink", "unreadable entry: a FIFO"]
    for row in rows:
        row.source.encode("utf-8")  # safely encoded
    assert any(r.source.endswith("b\\xff.warc.gz") for r in rows)


def test_a_folder_scan_with_damage_ends_cleanly(tmp_path: Path) -> None:
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    records = [page(i) for i in range(7)]
    records[2] = lengthen(records[2], 500)
    (crawl / "a.warc.gz").write_bytes(b"".join(gzip.compress(r) for r in records))
    (crawl / os.fsdecode(b"b\xfe.warc")).write_bytes(b"".join(page(i) for i in range(7, 10)))
    (crawl / "c.warc.gz").symlink_to(tmp_path / "gone")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "neardup.cli.main",
            "scan",
            str(crawl),
            "--out",
            str(tmp_path / "run"),
            "--json",
            "-q",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode in (0, 1), out.stderr[-2000:]
    assert "Traceback" not in out.stdout + out.stderr
    summary = json.loads(out.stdout)
    assert summary["records"] == 7 + 3 + 1


def test_an_over_long_redirect_target_is_a_reason(tmp_path: Path) -> None:
    long = "http://example.com/" + "x" * (MAX_REDIRECT_CHARS + 1)
    records = [
        page(0, b"", [("Location", long)], status="301 Moved Permanently"),
        page(1, b"", [("Location", "/short")], status="301 Moved Permanently"),
    ]
    path = tmp_path / "x.warc.gz"
    path.write_bytes(b"".join(gzip.compress(r) for r in records))
    rows = list(iter_warc(str(path)))
    assert rows[0].redirect_to is None
    assert rows[0].skipped_reason == f"redirect target too long ({len(long)} characters)"
    assert rows[1].redirect_to == "http://example.com/short"


def test_max_payload_bytes_is_validated() -> None:
    with pytest.raises(SettingsError):
        Settings(max_payload_bytes=0)
    assert Settings().max_payload_bytes >= MiB
