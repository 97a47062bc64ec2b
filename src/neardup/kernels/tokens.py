"""Broder's canonical token stream for every script: normalised tokens joined by single spaces.

The canonical text of a page is defined character by character:

1. **Normalisation.** Each code point c becomes NFKD(casefold(NFKD(casefold(NFD(c))))), the
   per-character form of Unicode's *compatibility caseless match* (D146): full-width and
   half-width forms, ligatures, circled and super-script digits and the like become their
   plain letters ('ＡＢＣ１２３' -> 'abc123', 'ﬁ' -> 'fi', '㍿' -> '株式会社'), case is folded
   ('Straße' -> 'strasse', 'Σ'/'ς' -> 'σ'), and precomposed letters are written decomposed,
   so 'é' and 'e' + U+0301 agree. The decomposed form is what makes this a per-character
   function (NFKC would have to compose across characters); it has exactly NFKC's
   equivalence classes except that marks typed in a non-canonical order are not reordered.
2. **Tokens.** A *word* is a maximal run of letters and digits (`str.isalnum()` of the
   normalised code points) with the combining marks (general category M*) that follow them,
   as in Unicode's `\\w` (UTS #18, Annex C). Characters of scripts written without spaces
   between words (Han, Hiragana, Katakana, Thai, Lao, Khmer, Myanmar; see `SOLO_SCRIPTS`)
   are *one token each*, with the combining marks that follow them (a Thai tone mark or
   vowel sign, a Japanese voicing mark, a Khmer coeng): maximal runs would make a Chinese
   paragraph one token, so one changed character would change every shingle of it. A
   5-shingle over such text is then 5 characters, the usual character 5-gram of CJK
   near-duplicate work. Their decimal digits stay words ('2024年' -> '2024 年').
   Mixed text works: 'Hello世界foo' -> 'hello 世 界 foo'.
3. Everything else (spaces, punctuation, the underscore, symbols such as `<`, `>`, `=`, `&`,
   `/`) separates tokens, which removes the "formatting, HTML commands" that the paper's
   canonical form ignores; a mark after a separator stays part of the separator.

Why a kernel and not `re.sub` plus `unicodedata.normalize`: those run at tens of MB/s on
real page text, several times slower than all the rest of sketching together. The kernel
decodes UTF-8 and looks every code point up in a table (`chartable.py`) built (about 0.4-1 s,
or handed in from the scan's on-disk cache, `pipeline/char_table_cache.py`) from Python's
own Unicode database (`unicodedata`, `str.isalnum`,
`str.casefold`), so the result is exactly the definition above (the tests compare it on
every code point) at several hundred MB/s; ASCII bytes take a branch-free path of their own.
The table depends on the Unicode version of the Python build (`unicodedata.unidata_version`).
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

from neardup.kernels.chartable import CODE, EXPAND, MARK, SEPARATOR, SOLO, char_table
from neardup.kernels.jit import njit

_INITIAL_GROWTH_NUM, _INITIAL_GROWTH_DEN = 3, 2  # first guess of output/input bytes
_PADDING = 8  # readable bytes after the last text, for 8-byte loads


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


@njit(cache=True, inline="always")
def _emit(out: np.ndarray, o: int, v: int, in_word: bool, solo: bool) -> tuple[int, bool, bool]:
    """Write one normalised code point `v` (a table value); returns (o, in_word, solo).

    `in_word`: a word is open (a separator must write a space). `solo`: the last token is
    a solo character whose closing space is out[o - 1], so a mark can still join it.
    """
    if v == SEPARATOR:
        if in_word:
            out[o] = 32
            o += 1
        return o, False, False
    cp = v & CODE
    if v & MARK:
        if in_word:
            return _put_utf8(out, o, cp), True, False
        if solo:  # reopen the solo token: the mark replaces its closing space
            o = _put_utf8(out, o - 1, cp)
            out[o] = 32
            return o + 1, False, True
        return o, False, False
    if v & SOLO:
        if in_word:
            out[o] = 32
            o += 1
        o = _put_utf8(out, o, cp)
        out[o] = 32
        return o + 1, False, True
    return _put_utf8(out, o, cp), True, False


@njit(cache=True, nogil=True, work=0)  # threads canonicalise side by side (the service)
def canonicalize_kernel(
    buf: np.ndarray,
    offsets: np.ndarray,
    codes: np.ndarray,
    expansions: np.ndarray,
    max_out: int,
    out: np.ndarray,
) -> np.ndarray:
    """Canonicalise every document of a packed UTF-8 buffer into `out`; returns the output
    offsets (n_docs + 1), or offsets whose last value is -1 when `out` was too small (the
    caller retries with a larger one).

    ASCII bytes never grow, so only the other characters check the room left. On ASCII the
    space is written at the first separator after a word (and dropped again at the end of
    a document), which keeps that path free of unpredictable branches. A solo character
    writes its closing space at once; `solo_at` remembers where in the input it ended, so a
    mark right after it (and only then) can still join it.
    """
    n_docs = offsets.shape[0] - 1
    out_offsets = np.empty(n_docs + 1, dtype=np.int64)
    later = 0  # input bytes of the documents after the current one
    for d in range(n_docs):
        later += offsets[d + 1] - offsets[d]
    cap = out.shape[0]
    o = 0
    for d in range(n_docs):
        doc_start = o
        out_offsets[d] = o
        i = offsets[d]
        end = offsets[d + 1]
        later -= end - i
        in_word = False
        solo_at = -1
        while i < end:
            c = np.int64(buf[i])
            if c < 0x80:  # ASCII: one byte in, at most one byte out, no data-dependent branch
                i += 1
                v = np.int64(codes[c])
                is_word = v >= 0
                out[o] = v if is_word else 32
                o += is_word or in_word
                in_word = is_word
                continue
            solo = solo_at == i
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
            v = np.int64(codes[cp]) if cp < codes.shape[0] else SEPARATOR
            if v == SEPARATOR:
                if in_word:
                    out[o] = 32
                    o += 1
                in_word = False
                continue
            if o + max_out + (end - i) + later + 1 > cap:
                out_offsets[n_docs] = -1
                return out_offsets
            if v & EXPAND:
                k = v & CODE
                for j in range(k + 1, k + 1 + expansions[k]):
                    o, in_word, solo = _emit(out, o, np.int64(expansions[j]), in_word, solo)
            else:
                o, in_word, solo = _emit(out, o, v, in_word, solo)
            solo_at = i if solo else -1
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

    if isinstance(texts, pa.ChunkedArray):
        texts = texts.chunk(0) if texts.num_chunks == 1 else texts.combine_chunks()
    if not (pa.types.is_string(texts.type) or pa.types.is_large_string(texts.type)):
        texts = texts.cast(pa.large_string())
    if texts.null_count:
        import pyarrow.compute as pc  # only here: its import costs a small scan 0.05 s

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
    table = char_table()
    end = int(np.sum(np.diff(offsets)))  # input bytes, wherever the documents lie
    size = end * _INITIAL_GROWTH_NUM // _INITIAL_GROWTH_DEN + table.max_out + 16
    while True:  # decomposed Hangul and long compatibility forms can outgrow the first guess
        out = np.empty(size + _PADDING, dtype=np.uint8)
        out_offsets = canonicalize_kernel(
            buf, offsets, table.codes, table.expansions, table.max_out, out[:size]
        )
        if out_offsets[-1] >= 0:
            break
        size *= 2
    stop = int(out_offsets[-1])
    out[stop : stop + _PADDING] = 0  # padding for the 8-byte loads of the sketch kernels
    return out[: stop + _PADDING], out_offsets


def unpack_texts(buf: np.ndarray, offsets: np.ndarray) -> list[str]:
    """The inverse of `pack_texts` for canonical (surrogate-free) UTF-8."""
    data = buf.tobytes()
    bounds = offsets.tolist()
    return [data[a:b].decode("utf-8") for a, b in itertools.pairwise(bounds)]


def canonicalize(text: str) -> str:
    """The canonical form of `text` (see the module doc): normalised tokens joined by spaces."""
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
