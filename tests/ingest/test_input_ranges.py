"""A file cut into ranges (`ingest/input_ranges.py`) reads, range after range, as the whole
file does: every record, offset, length and reason, on the layouts crawlers publish and on
the same files damaged (bytes flipped, spans cut, inserted and repeated). A cut only ever
falls on a record boundary, so no range can split or lose a record."""

from __future__ import annotations

import dataclasses
import gzip
import json
import random
from collections.abc import Iterator
from pathlib import Path

import pytest
from ccwarc import Fetch, write_warc
from damaged_warcs import mutate, page

from neardup.ingest import input_ranges
from neardup.ingest.input_ranges import InputRange, iter_range_units, plan_ranges
from neardup.ingest.readers import expand_inputs, iter_input_units, iter_records
from neardup.ingest.record import RawRecord
from neardup.ingest.tables import LineBlock, block_records

CAP = 1 << 20


def _whole(path: str, kind: str) -> Iterator[RawRecord | LineBlock]:
    return iter_input_units(path, kind, None, CAP)


def _ranged(path: str, target: int) -> tuple[list[tuple], list[InputRange]]:
    """The records of `path` read range by range, line numbers counted on across ranges."""
    ranges = plan_ranges(expand_inputs([path]), target)
    rows: list[tuple] = []
    lines = 0
    for rng in ranges:
        if rng.first_of_input:
            lines = 0
        seen: list[int] = []
        for unit in iter_range_units(rng, _whole, CAP, seen.append):
            for rec in block_records(unit, CAP) if isinstance(unit, LineBlock) else [unit]:
                if rng.cut == "lines":
                    rec.offset += lines
                rows.append(dataclasses.astuple(rec))
        lines += sum(seen)
    return rows, ranges


def _reference(path: str) -> list[tuple]:
    return [dataclasses.astuple(rec) for rec in iter_records([path], None, CAP)]


def _fetches(n: int) -> list[Fetch]:
    return [
        Fetch(f"https://site{i % 5}.example/p/{i}", f"<p>{'word ' * (20 + i % 40)} page {i}</p>")
        for i in range(n)
    ] + [Fetch("https://site0.example/old", status=301, location="/p/1")]


@pytest.fixture(scope="module")
def archives(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("ranges")
    members = write_warc(folder / "cc.warc.gz", _fetches(120), request_first=True)
    plain = folder / "plain.warc"
    plain.write_bytes(gzip.decompress(members.read_bytes()))
    stream = folder / "stream.warc.gz"  # one gzip stream: cannot be entered mid-file
    stream.write_bytes(gzip.compress(plain.read_bytes()))
    chunked = folder / "chunked.warc"
    chunked.write_bytes(
        b"".join(
            page(
                i,
                body=b"%x\r\n%s\r\n0\r\n\r\n" % (len(b"<p>x</p>" * i), b"<p>x</p>" * i),
                headers=[("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")],
            )
            for i in range(1, 60)
        )
    )
    rows = folder / "rows.jsonl"
    lines = [
        json.dumps({"url": f"http://j.example/{i}", "text": "w " * (i % 50)}) for i in range(400)
    ]
    lines[7] = '{"url": "http://bad.example", "text": "no end'
    rows.write_text("\n".join(line + ("\n" if i % 9 else "\n\n") for i, line in enumerate(lines)))
    return {p.name: p for p in (members, plain, stream, chunked, rows)}


@pytest.mark.parametrize("name", ["cc.warc.gz", "plain.warc", "chunked.warc", "rows.jsonl"])
@pytest.mark.parametrize("target", [700, 4000, 30_000])
def test_ranges_read_as_the_whole_file(archives: dict[str, Path], name: str, target: int) -> None:
    path = str(archives[name])
    rows, ranges = _ranged(path, target)
    assert rows == _reference(path)
    assert len(ranges) > 1 and all(r.cut for r in ranges)
    assert [r.start for r in ranges[1:]] == [r.stop for r in ranges[:-1]]


def test_a_single_gzip_stream_is_one_range_and_says_why(archives: dict[str, Path]) -> None:
    path = str(archives["stream.warc.gz"])
    rows, ranges = _ranged(path, 700)
    assert rows == _reference(path)
    assert len(ranges) == 1 and ranges[0].cut == "" and "one gzip stream" in ranges[0].whole


@pytest.mark.parametrize("name", ["cc.warc.gz", "plain.warc", "chunked.warc", "rows.jsonl"])
def test_damaged_files_read_the_same_in_ranges(
    archives: dict[str, Path], name: str, tmp_path: Path
) -> None:
    rng = random.Random(47)
    source = archives[name].read_bytes()
    for k in range(15):
        path = tmp_path / f"m{k}-{name}"
        path.write_bytes(mutate(source, rng))
        for target in (900, 5000):
            rows, _ = _ranged(str(path), target)
            assert rows == _reference(str(path)), (k, target)


def test_the_target_gives_every_worker_several_tasks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(input_ranges.RANGE_BYTES_VARIABLE, raising=False)
    per_worker = input_ranges.TASKS_PER_WORKER
    assert input_ranges.range_bytes(91 << 20, 2) == (91 << 20) // (2 * per_worker)
    assert input_ranges.range_bytes(10 << 30, 2) == input_ranges.RANGE_BYTES
    assert input_ranges.range_bytes(100 << 10, 16) == input_ranges.MIN_RANGE_BYTES
    monkeypatch.setenv(input_ranges.RANGE_BYTES_VARIABLE, "5000")
    assert input_ranges.range_bytes(10 << 30, 2) == 5000
