"""Byte bodies of the synthetic crawl that are not rendered HTML: an image and gzip.

They let the crawl hold the records a reader must skip or decode (a PNG response, a
gzip-encoded page), built reproducibly so the same seed gives the same bytes.
"""

from __future__ import annotations

import struct
import zlib


def tiny_png(size: int = 16, shade: int = 128) -> bytes:
    """A valid grey PNG image, for a non-HTML response the readers must skip."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", size, size, 8, 0, 0, 0, 0)
    rows = b"".join(b"\x00" + bytes([shade]) * size for _ in range(size))
    idat = chunk(b"IDAT", zlib.compress(rows, 9))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + idat + chunk(b"IEND", b"")


def gzip_bytes(data: bytes) -> bytes:
    """gzip with a zero timestamp, so encoded bodies are reproducible."""
    co = zlib.compressobj(6, zlib.DEFLATED, zlib.MAX_WBITS + 16)
    return co.compress(data) + co.flush()
