"""Broder's canonical token stream: lower-cased words joined by single spaces.

A *word* is a maximal run of Unicode letters and digits (`str.isalnum()`, exactly what `re`'s
`[^\\W_]` matches) together with the combining marks (general category M*) that follow them.
Marks belong to words as in Unicode's own definition of `\\w` (UTS #18, Annex C), so a letter
written with a combining accent, or a Devanagari word with its vowel signs, stays one word
instead of being cut at every mark; a mark after a separator (say a variation selector after
an emoji) stays part of the separator. Everything else (spaces, punctuation, the underscore,
symbols such as `<`, `>`, `=`, `&`, `/`) separates words, which removes the "formatting, HTML
commands" that the paper's canonical form ignores.

Lower-casing is Python's full lower-case mapping of each character (`str.lower`, so U+0130
'İ' becomes 'i̇'), except that Greek capital and final sigma both become 'σ': `str.lower`
chooses between 'σ' and 'ς' from the surrounding letters, and a context-free mapping keeps the
canonical form a per-character function.

Why a kernel and not `re.sub`: one `re.sub` with a precompiled class runs at about 30 MB/s
on real page text, several times slower than all the rest of sketching together. The kernel
decodes UTF-8 and looks every code point up in a table built once per process from Python's
own Unicode database (`unicodedata`, `str.isalnum`, `str.lower`), so the result is exactly
the reference definition above (the tests compare it on every code point) at several hundred
MB/s. The table depends on the Unicode version of the Python build
(`unicodedata.unidata_version`): characters assigned in a newer Unicode version can tokenise
differently on an older Python.
"""

from __future__ import annotations

import functools
import itertools
import sys
import unicodedata
from typing import Any

import numpy as np
from numba import njit

SEPARATOR = -1  # table value of a character that separates words
_MARK = 1 << 24  # flag on combining marks: word characters only right after one
_CODE = _MARK - 1
_DOTTED_I = _CODE  # U+0130, whose lower case is two code points: 'i' + U+0307
_UTF8_GROWTH_NUM, _UTF8_GROWTH_DEN = 3, 2  # lower-casing grows UTF-8 by at most 3/2
_PADDING = 8  # readable bytes after the last text, for 8-byte loads


@functools.cache
def char_table() -> np.ndarray:
    """int32 per code point: the lower-case code point of a word character, or SEPARATOR.

    Built in about 0.2 s on first use and cached for the life of the process.
    """
    n = sys.maxunicode + 1
    text = np.arange(n, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
    word = np.fromiter(map(str.isalnum, text), dtype=bool, count=n)
    mark = np.fromiter((c[0] == "M" for c in map(unicodedata.category, text)), bool, count=n)
    # Lower-case the whole range at once; only U+0130 changes length, so lower the two halves
    # around it separately to keep positions aligned.
    lowered = text[:0x130].lower() + "\u0130" + text[0x131:].lower()
    low = np.frombuffer(lowered.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    table = np.full(n, SEPARATOR, dtype=np.int32)
    table[word] = low[word].astype(np.int32)
    mark &= ~word
    table[mark] = low[mark].astype(np.int32) | _MARK
    table[0x130] = _DOTTED_I
    table[0x3A3] = 0x3C3  # Σ -> σ
    table[0x3C2] = 0x3C3  # ς -> σ
    table.setflags(write=False)
    return table


def _utf8_len(cp: np.ndarray) -> np.ndarray:
    return 1 + (cp >= 0x80) + (cp >= 0x800) + (cp >= 0x10000)


@njit(cache=True, inline="always")
def _put_utf8(out: np.ndarray, o: int, cp: int) -> int:
    if cp < 0x80:
        out[o] = cp
        return o + 1
    if cp < 0x800:
        out[o] = 0xC0 | (cp >> 6)
        out[o + 1] = 0x80 | (cp & 0x3F)
        return o + 2
    if cp < 0x10000:
        out[o] = 0xE0 | (cp >> 12)
        out[o + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[o + 2] = 0x80 | (cp & 0x3F)
        return o + 3
    out[o] = 0xF0 | (cp >> 18)
    out[o + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[o + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[o + 3] = 0x80 | (cp & 0x3F)
    return o + 4


@njit(cache=True)
def canonicalize_kernel(
    buf: np.ndarray, offsets: np.ndarray, table: np.ndarray, out: np.ndarray
) -> np.ndarray:
    """Canonicalise every document of a packed UTF-8 buffer into `out`; returns the output
    offsets (n_docs + 1). `out` needs 3/2 of the input size (lower-casing can turn a 2-byte
    character into a 3-byte one; separators only shrink).

    The space is written at the first separator after a word (and dropped again at the end
    of a document), which keeps the ASCII path free of unpredictable branches.
    """
    n_docs = offsets.shape[0] - 1
    out_offsets = np.empty(n_docs + 1, dtype=np.int64)
    o = 0
    for d in range(n_docs):
        doc_start = o
        out_offsets[d] = o
        i = offsets[d]
        end = offsets[d + 1]
        in_word = False
        while i < end:
            c = np.int64(buf[i])
            if c < 0x80:  # ASCII: one byte in, at most one byte out, no data-dependent branch
                i += 1
                v = np.int64(table[c])
                is_word = v >= 0
                out[o] = v if is_word else 32
                o += is_word or in_word
                in_word = is_word
                continue
            if c < 0xE0 and i + 1 < end:
                cp = ((c & 0x1F) << 6) | (np.int64(buf[i + 1]) & 0x3F)
                i += 2
            elif c < 0xF0 and i + 2 < end:
                cp = (
                    ((c & 0x0F) << 12)
                    | ((np.int64(buf[i + 1]) & 0x3F) << 6)
                    | (np.int64(buf[i + 2]) & 0x3F)
                )
                i += 3
            elif i + 3 < end:
                cp = (
                    ((c & 0x07) << 18)
                    | ((np.int64(buf[i + 1]) & 0x3F) << 12)
                    | ((np.int64(buf[i + 2]) & 0x3F) << 6)
                    | (np.int64(buf[i + 3]) & 0x3F)
                )
                i += 4
            else:  # truncated sequence: cannot come from str.encode; a separator
                i += 1
                cp = 0xD800
            v = np.int64(table[cp]) if cp < table.shape[0] else SEPARATOR
            if v == SEPARATOR or (v & _MARK and not in_word):
                # A mark only extends a word; after a separator it belongs to the separator.
                if in_word:
                    out[o] = 32
                    o += 1
                in_word = False
                continue
            in_word = True
            v &= _CODE
            if v == _DOTTED_I:
                out[o] = 0x69
                o = _put_utf8(out, o + 1, 0x307)
            else:
                o = _put_utf8(out, o, v)
        if o > doc_start and out[o - 1] == 32:
            o -= 1
    out_offsets[n_docs] = o
    return out_offsets


def pack_texts(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Concatenate texts as UTF-8 into one uint8 buffer plus int64 offsets (n + 1), so a
    kernel can process a whole batch in one call. The buffer has 8 bytes of padding after
    offsets[-1]. Lone surrogates (which `str` allows) are
    kept by `surrogatepass` and treated as separators downstream."""
    encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
    offsets = np.zeros(len(encoded) + 1, dtype=np.int64)
    np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)), out=offsets[1:])
    # 8 zero bytes of padding after the last text, for the kernels' 8-byte loads.
    encoded.append(bytes(_PADDING))
    buf = np.frombuffer(b"".join(encoded), dtype=np.uint8)
    return buf, offsets


def pack_arrow(texts: Any) -> tuple[np.ndarray, np.ndarray]:
    """`pack_texts` for an Arrow string array (or chunked array, e.g. a Parquet column):
    Arrow already stores the texts as one UTF-8 buffer plus offsets, so this only copies
    that buffer once (to add the padding), with no Python string per text. Nulls become
    empty texts."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.chunk(0) if texts.num_chunks == 1 else texts.combine_chunks()
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        texts = texts.cast(pa.large_string())
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    _, offset_buf, data_buf = texts.buffers()
    width = np.int64 if pa.types.is_large_string(texts.type) else np.int32
    if offset_buf is None:  # an empty array
        return np.zeros(_PADDING, dtype=np.uint8), np.zeros(1, dtype=np.int64)
    offsets = np.frombuffer(offset_buf, dtype=width)[texts.offset : texts.offset + len(texts) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    offsets = offsets.astype(np.int64) - start  # a slice of a column starts mid-buffer
    buf = np.empty(end - start + _PADDING, dtype=np.uint8)
    buf[end - start :] = 0
    if data_buf is not None and end > start:
        buf[: end - start] = np.frombuffer(data_buf, dtype=np.uint8, count=end)[start:]
    return buf, offsets


def canonicalize_packed(buf: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Canonical UTF-8 of a packed batch: (buffer, offsets). The sketch kernels read this
    directly, without building Python strings."""
    end = int(offsets[-1])
    out = np.empty(end * _UTF8_GROWTH_NUM // _UTF8_GROWTH_DEN + 16, dtype=np.uint8)
    out_offsets = canonicalize_kernel(buf, offsets, char_table(), out)
    stop = int(out_offsets[-1])
    out[stop : stop + _PADDING] = 0  # padding for the 8-byte loads of the sketch kernels
    return out[: stop + _PADDING], out_offsets


def unpack_texts(buf: np.ndarray, offsets: np.ndarray) -> list[str]:
    """The inverse of `pack_texts` for canonical (surrogate-free) UTF-8."""
    data = buf.tobytes()
    bounds = offsets.tolist()
    return [data[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]


def canonicalize(text: str) -> str:
    """Broder's canonical form of `text`: lower-cased words joined by single spaces."""
    if text.isascii():
        # The common case needs no table: `bytes.translate` maps each byte in C.
        return " ".join(text.encode("ascii").translate(_ASCII_MAP).decode("ascii").split())
    out, offsets = canonicalize_packed(*pack_texts([text]))
    return out[: offsets[1]].tobytes().decode("utf-8")


def canonicalize_batch(texts: list[str]) -> list[str]:
    """`canonicalize` of many texts in one kernel call."""
    return unpack_texts(*canonicalize_packed(*pack_texts(texts)))


def _ascii_map() -> bytes:
    """Byte -> byte table for ASCII: letters lowered, digits kept, all else a space."""
    table = bytearray(b" " * 256)
    for c in range(128):
        ch = chr(c)
        if ch.isalnum():
            table[c] = ord(ch.lower())
    return bytes(table)


_ASCII_MAP = _ascii_map()
