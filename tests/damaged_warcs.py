"""Small WARC files and the damage seen in published crawls, written byte by byte (warcio for
the intact records), shared by tests/ingest/test_damaged.py and bench/damaged_input.py so the
benchmark measures exactly the cases the tests check."""

from __future__ import annotations

import gzip
import io
import random
import zlib

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

MiB = 1 << 20


def page(i: int, body: bytes | None = None, headers: list | None = None, status="200 OK") -> bytes:
    """One uncompressed WARC response record, as warcio writes it (a page of 40 words, enough
    for a scan to compare it, unless `body` is given)."""
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=False)
    if body is None:
        words = " ".join(f"w{i}x{k}" for k in range(40))
        body = f"<html><body><p>page {i}: {words}</p></body></html>".encode()
    http = StatusAndHeaders(status, headers or [("Content-Type", "text/html")], protocol="HTTP/1.1")
    record = writer.create_warc_record(
        f"http://example.com/{i}",
        "response",
        payload=io.BytesIO(body),
        http_headers=http,
        length=len(body),
    )
    writer.write_record(record)
    return buf.getvalue()


def lengthen(record: bytes, extra: int) -> bytes:
    """The record with its WARC Content-Length raised by `extra` bytes (the damage)."""
    head, sep, rest = record.partition(b"\r\n\r\n")
    lines = [
        b"Content-Length: %d" % (int(line.split(b":")[1]) + extra)
        if line.startswith(b"Content-Length:")
        else line
        for line in head.split(b"\r\n")
    ]
    return b"\r\n".join(lines) + sep + rest


def gz(records: list[bytes]) -> bytes:
    """One gzip member per record, as the WARC standard asks."""
    return b"".join(gzip.compress(r) for r in records)


def bomb(size: int) -> bytes:
    """`size` zero bytes as one gzip stream (about 1/1000 of the size)."""
    enc = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = bytes(MiB)
    return b"".join([enc.compress(block) for _ in range(size // MiB)] + [enc.flush()])


def warc_level_bomb(size: int) -> bytes:
    """A response record whose body is `size` bytes, in one gzip member written in pieces."""
    http = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n"
    head = (
        b"WARC/1.0\r\nWARC-Type: response\r\nWARC-Target-URI: http://example.com/big\r\n"
        b"WARC-Date: 2024-01-01T00:00:00Z\r\nWARC-Record-ID: <urn:uuid:big>\r\n"
        b"Content-Type: application/http; msgtype=response\r\n"
        b"Content-Length: %d\r\n\r\n" % (len(http) + size)
    )
    enc = zlib.compressobj(9, zlib.DEFLATED, 31)
    parts = [enc.compress(head + http)]
    parts += [enc.compress(b"a" * MiB) for _ in range(size // MiB)]
    return b"".join([*parts, enc.compress(b"\r\n\r\n"), enc.flush()])


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One to four damages of the kinds a broken download or disk gives: bytes flipped,
    spans cut, random spans inserted, spans repeated."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if len(out) < 16:
            break
        start = rng.randrange(len(out) - 8)
        span = rng.randint(1, min(400, len(out) - start))
        kind = rng.choice(("flip", "cut", "insert", "repeat"))
        if kind == "flip":
            for at in rng.sample(range(start, start + span), min(span, 8)):
                out[at] ^= 1 << rng.randrange(8)
        elif kind == "cut":
            del out[start : start + span]
        elif kind == "insert":
            out[start:start] = rng.randbytes(span)
        else:
            out[start:start] = out[start : start + span]
    return bytes(out)
