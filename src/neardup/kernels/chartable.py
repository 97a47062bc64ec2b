"""The per-code-point table of the canonical tokenizer, built from Python's Unicode database.

`neardup.kernels.tokens` defines the canonical token stream and runs it as a byte kernel;
this module turns that definition into the one table the kernel reads: for every code
point, its compatibility caseless form (`fold`) and the class of each code point of that
form (a word character, a combining mark, a character of a script written without spaces,
or a separator). Building it takes about half a second of CPU, so it is kept out of the
kernel's module, which only reads it, and a layer above may keep a built table on disk and
hand it over with `install_char_table` (kernels do no file I/O; see
`neardup.pipeline.char_table_cache`); `char_table` builds one only when none was handed over.
"""

from __future__ import annotations

import sys
import unicodedata

import numpy as np

SEPARATOR = -1  # table value of a character that separates tokens
CODE = (1 << 21) - 1  # the code point (or, with EXPAND, an index into the expansions)
MARK = 1 << 21  # combining mark: extends the token before it, else a separator
SOLO = 1 << 22  # a character of a script written without spaces: a token of its own
EXPAND = 1 << 23  # the character normalises to several code points (see `Table`)

# Unicode character names begin with the script's name for the scripts written without
# spaces (Python has no Script property; its names come from the same database).
SOLO_SCRIPTS = (
    "CJK UNIFIED IDEOGRAPH",
    "CJK COMPATIBILITY IDEOGRAPH",
    "IDEOGRAPHIC",  # 々 〇 and the iteration marks
    "VERTICAL IDEOGRAPHIC",
    "MASU MARK",
    "HANGZHOU NUMERAL",
    "HIRAGANA",
    "HENTAIGANA",
    "KATAKANA",  # also 'KATAKANA-HIRAGANA PROLONGED SOUND MARK' (ー)
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
)


_INERT = frozenset(("Cn", "Co", "Cs"))


def fold(ch: str) -> str:
    """Step 1 of `neardup.kernels.tokens`' definition for one character: its compatibility
    caseless form (Unicode D146, applied to one code point)."""
    nf = unicodedata.normalize
    return nf("NFKD", nf("NFKD", nf("NFD", ch).casefold()).casefold())


class Table:
    """The per-code-point table the kernel reads (see `char_table`).

    `codes[c]` is SEPARATOR, or one normalised code point with its class flags (MARK,
    SOLO; none for a word character), or EXPAND | i where `expansions[i]` is a count n
    followed by n such values (SEPARATOR allowed) for a character that normalises to
    several code points. `max_out` bounds the output bytes of one input character.
    """

    def __init__(self, codes: np.ndarray, expansions: np.ndarray, max_out: int) -> None:
        self.codes = codes
        self.expansions = expansions
        self.max_out = max_out


def _classes(text: str, cats: list[str]) -> np.ndarray:
    """int32 class flags of every code point as *output* of normalisation: 0 for a word
    character, MARK, SOLO, or SEPARATOR."""
    n = len(text)
    word = np.fromiter(map(str.isalnum, text), dtype=bool, count=n)
    mark = np.fromiter((c[0] == "M" for c in cats), dtype=bool, count=n)
    flags = np.full(n, SEPARATOR, dtype=np.int32)
    flags[word] = 0
    flags[mark & ~word] = MARK
    for c in np.flatnonzero(word).tolist():
        if cats[c] != "Nd" and unicodedata.name(text[c], "").startswith(SOLO_SCRIPTS):
            flags[c] = SOLO
    return flags


def _changed(text: str, cats: list[str], block: int = 256) -> list[int]:
    """Code points from U+0080 whose `fold` may differ from themselves. A block that is
    already NFKD and case-folded as a whole holds none (NFKD would decompose any character
    with a decomposition), which skips most of the range without a call per character.
    Unassigned, private-use and surrogate code points fold to themselves."""
    found: list[int] = []
    for start in range(0x80, len(text), block):
        chunk = text[start : start + block]
        if chunk.casefold() == chunk and unicodedata.is_normalized("NFKD", chunk):
            continue
        found += [cp for cp in range(start, start + len(chunk)) if cats[cp] not in _INERT]
    return found


def build_char_table() -> Table:
    """A new table, built from `unicodedata` (about half a second of CPU)."""
    n = sys.maxunicode + 1
    text = np.arange(n, dtype=np.uint32).tobytes().decode("utf-32-le", "surrogatepass")
    cats = list(map(unicodedata.category, text))
    flags = _classes(text, cats)

    def value(ch: str) -> int:
        cp = ord(ch)
        return SEPARATOR if flags[cp] == SEPARATOR else cp | int(flags[cp])

    codes = np.where(flags == SEPARATOR, SEPARATOR, np.arange(n, dtype=np.int32) | flags)
    codes = codes.astype(np.int32)
    expansions: list[int] = [0]
    max_len = 1
    for cp in _changed(text, cats):
        folded = fold(text[cp])
        if folded == text[cp]:
            continue
        values = [value(c) for c in folded]
        if len(values) == 1:
            codes[cp] = values[0]
        elif all(v == SEPARATOR for v in values):
            codes[cp] = SEPARATOR
        else:
            codes[cp] = EXPAND | len(expansions)
            expansions += [len(values), *values]
            max_len = max(max_len, len(values))
    for cp in range(ord("A"), ord("Z") + 1):
        codes[cp] = cp + 32
    table = Table(codes, np.array(expansions, dtype=np.int32), 6 * max_len + 2)
    table.codes.setflags(write=False)
    table.expansions.setflags(write=False)
    return table


_installed: list[Table] = []  # the table of this process, once built or handed over


def char_table() -> Table:
    """The kernel's table: the one handed over by `install_char_table`, else built on first
    use and kept for the life of the process."""
    if not _installed:
        _installed.append(build_char_table())
    return _installed[0]


def has_char_table() -> bool:
    """Whether this process holds its table already (built or handed over), so a caller
    can skip loading one."""
    return bool(_installed)


def install_char_table(table: Table) -> None:
    """Make `table` (a table built by `build_char_table`, in this process or another and
    stored) the one `char_table` returns. Checked for shape and type here, so a damaged
    table fails at once rather than inside the compiled kernel; its content is the caller's
    to vouch for."""
    n = sys.maxunicode + 1
    codes, expansions = table.codes, table.expansions
    if codes.dtype != np.int32 or codes.shape != (n,):
        raise ValueError(f"a character table has {n} int32 codes")
    if expansions.dtype != np.int32 or expansions.ndim != 1 or expansions.size < 1:
        raise ValueError("a character table's expansions are a non-empty int32 vector")
    if table.max_out < 8:
        raise ValueError("a character table's max_out is at least 8")
    codes.setflags(write=False)
    expansions.setflags(write=False)
    _installed[:] = [table]
