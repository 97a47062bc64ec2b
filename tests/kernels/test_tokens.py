"""Canonical token stream: examples, and the kernel against a per-character reference.

The reference is written here from the definition in neardup.kernels.tokens with other
means: whole-string `unicodedata.normalize` (not a table per code point), and the scripts
written without spaces as the Unicode block ranges of their charts (the kernel uses the
character names).
"""

from __future__ import annotations

import random
import sys
import unicodedata

import pytest

from neardup.kernels import canonicalize, canonicalize_batch, canonicalize_packed, pack_texts
from neardup.kernels.tokens import unpack_texts

# Blocks of Han, Hiragana, Katakana, Thai, Lao, Khmer and Myanmar letters (after
# normalisation: compatibility ideographs, radicals and half-width kana fold into these).
SOLO_BLOCKS = [
    (0x0E00, 0x0E7F),  # Thai
    (0x0E80, 0x0EFF),  # Lao
    (0x1000, 0x109F),  # Myanmar
    (0xA9E0, 0xA9FF),  # Myanmar Extended-B
    (0xAA60, 0xAA7F),  # Myanmar Extended-A
    (0x1780, 0x17FF),  # Khmer
    (0x19E0, 0x19FF),  # Khmer Symbols
    (0x3005, 0x3007),  # ideographic iteration mark, closing mark, number zero
    (0x3021, 0x3029),  # Hangzhou numerals
    (0x3038, 0x303C),  # Hangzhou numerals, vertical iteration mark, masu mark
    (0x3040, 0x309F),  # Hiragana
    (0x30A0, 0x30FF),  # Katakana (with the prolonged sound mark)
    (0x31F0, 0x31FF),  # Katakana Phonetic Extensions
    (0x3400, 0x4DBF),  # CJK Extension A
    (0x4E00, 0x9FFF),  # CJK Unified Ideographs
    (0xF900, 0xFAFF),  # CJK Compatibility Ideographs
    (0x1AFF0, 0x1AFFF),  # Kana Extended-B
    (0x1B000, 0x1B16F),  # Kana Supplement, Kana Extended-A, Small Kana Extension
    (0x1D372, 0x1D376),  # ideographic tally marks
    (0x20000, 0x323AF),  # CJK Extensions B to H, Compatibility Supplement
]


SOLO_CODE_POINTS = frozenset(cp for a, b in SOLO_BLOCKS for cp in range(a, b + 1))


def is_solo(ch: str) -> bool:
    return ord(ch) in SOLO_CODE_POINTS and unicodedata.category(ch) != "Nd"


def normalize(text: str) -> str:
    """Unicode's compatibility caseless form (D146) of a whole string."""
    nf = unicodedata.normalize
    return nf("NFKD", nf("NFKD", nf("NFD", text).casefold()).casefold())


def reference(text: str, per_char: bool = False) -> str:
    """The definition in neardup.kernels.tokens, one character at a time. `per_char`
    normalises each code point alone (marks typed out of canonical order stay so)."""
    normal = "".join(map(normalize, text)) if per_char else normalize(text)
    tokens: list[str] = []
    takes_marks = takes_letters = False
    for ch in normal:
        if ch.isalnum():
            if is_solo(ch):
                tokens.append(ch)
                takes_marks, takes_letters = True, False
            elif takes_letters:
                tokens[-1] += ch
            else:
                tokens.append(ch)
                takes_marks = takes_letters = True
        elif unicodedata.category(ch).startswith("M") and takes_marks:
            tokens[-1] += ch
        else:
            takes_marks = takes_letters = False
    return " ".join(tokens)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", ""),
        ("   \n\t ", ""),
        ("Hello, World!", "hello world"),
        ("A Rose is a ROSE.", "a rose is a rose"),
        ('<p class="x">Hi&nbsp;there</p>', "p class x hi nbsp there p"),
        ("snake_case and kebab-case", "snake case and kebab case"),
        ("don't stop", "don t stop"),
        ("price: $3.50 (20%)", "price 3 50 20"),
        ("Ünïcödé STRASSE Straße", "ünïcödé strasse strasse"),  # full case folding
        ("ΟΔΟΣ οδός Σίσυφος", "οδοσ οδόσ σίσυφοσ"),  # every sigma folds to σ
        ("İstanbul", "i̇stanbul"),
        ("naïve, composed", "naïve composed"),  # decomposed: i + U+0308 stays one word
        ("café cafe\u0301", "café café"),  # precomposed and decomposed agree
        ("ＡＢＣ１２３ ＦＵＬＬ－ｗｉｄｔｈ", "abc123 full width"),  # NFKC: full-width forms
        ("ﬁnancial ① x² ½", "financial 1 x2 1 2"),  # ligatures, circled, super, fractions
        ("Hello世界foo", "hello 世 界 foo"),  # mixed text
        ("ŞEHİR 東京タワー 2024年", "şehi̇r 東 京 タ ワ ー 2024 年"),  # digits stay words
        ("東京、大阪。「日本」", "東 京 大 阪 日 本"),  # CJK punctuation separates
        ("ｶﾞｷﾞ ㍿ ⽇", "ガ ギ 株 式 会 社 日"),  # half-width kana, squares, radicals
        ("ภาษาไทย ก่อนหน้า", "ภ า ษ า ไ ท ย ก่ อ น ห น้ า"),  # Thai marks stay on their base
        ("ພາສາລາວ", "ພ າ ສ າ ລ າ ວ"),  # Lao
        ("ភាសាខ្មែរ", "ភា សា ខ្ មែ រ"),  # Khmer: vowel signs and coeng are marks
        ("မြန်မာ", "မြ န် မာ"),  # Myanmar
        ("한국어 문장", "한국어 문장"),  # Hangul is written with spaces: words
        ("हिन्दी भाषा", "हिन्दी भाषा"),  # vowel signs and virama are marks
        ("ok 👍\ufe0f fine", "ok fine"),  # a mark after a separator is a separator
        ("x\u0301 \u0301y", "x\u0301 y"),
        ("世\u0301x", "世\u0301 x"),  # a mark joins a solo character, a letter does not
        ("tab\tnew\nline\r\nend", "tab new line end"),
        ("a\ud800b", "a b"),  # a lone surrogate separates
    ],
)
def test_examples(text: str, expected: str) -> None:
    # The canonical text is decomposed; the expectations are written composed to be read.
    assert canonicalize(text) == unicodedata.normalize("NFD", expected)
    assert reference(text) == unicodedata.normalize("NFD", expected)


def test_every_code_point_matches_reference() -> None:
    chars = [chr(c) for c in range(sys.maxunicode + 1)]
    # Each character alone, after a letter (marks attach), and between letters.
    for sep in ("", "a"):
        text = " ".join(sep + c + "b" for c in chars)
        assert canonicalize(text) == reference(text)
    text = "".join(chars)  # marks of different classes side by side: not reordered
    assert canonicalize(text) == reference(text, per_char=True)


def test_random_mixtures_and_batch() -> None:
    rng = random.Random(5)
    pool = (
        "aZ09 ,.-_<>/&;:'\"\t\nÉéßΣσςİıЖж中文ـً\u0301\u0308👍\ufe0f\u200b\u00a0\ud800"
        "ＡＺ０９ﬁ①½㍿ｶﾞカが\u3099ー。、ก่ำเภาษ\u0e49ខ្មែរမြန်ພາ한국"
    )
    texts = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 60))) for _ in range(300)]
    # Random marks land in any order, which the kernel does not reorder (see the module).
    expected = [reference(t, per_char=True) for t in texts]
    assert [canonicalize(t) for t in texts] == expected
    assert canonicalize_batch(texts) == expected
    assert canonicalize_batch([]) == []


def test_ascii_fast_path_agrees_with_kernel() -> None:
    ascii_chars = "".join(chr(c) for c in range(128))
    text = " ".join(a + b for a in ascii_chars for b in "aZ9_ ")
    assert canonicalize(text) == canonicalize_batch([text])[0] == reference(text)


def test_output_larger_than_first_guess() -> None:
    """Decomposed Hangul and long compatibility forms outgrow the first output buffer."""
    texts = ["한국어" * 500, "ﷺ" * 300, "plain ascii", "ｶﾞ" * 400]
    out = canonicalize_batch(texts)
    assert out == [reference(t) for t in texts]
    assert len(out[1].encode()) > 3 * len(texts[1].encode())


def test_packed_documents_need_not_start_the_buffer() -> None:
    texts = ["ＡＢＣ 한국어" * 50, "東京タワー", "ok"]
    buf, offsets = pack_texts(["skipped text", *texts])
    out, out_offsets = canonicalize_packed(buf, offsets[1:])
    assert unpack_texts(out, out_offsets) == [reference(t) for t in texts]


def test_idempotent() -> None:
    text = "Some <b>HTML</b> — with ünïcode, İ and ΟΔΟΣ; ＡＢＣ 東京タワー ภาษาไทย ㍿ ﬁ."
    once = canonicalize(text)
    assert canonicalize(once) == once
