"""The web-like text generator the scale benchmarks read: deterministic, shardable, and its
planted copies are the near-duplicates it says they are."""

from __future__ import annotations

import pytest

from neardup.synth.webtext import iter_webtext, write_webtext


def _shingles(text: str, k: int = 5) -> set[tuple[str, ...]]:
    words = text.split(" ")
    return {tuple(words[i : i + k]) for i in range(len(words) - k + 1)}


def _jaccard(a: str, b: str) -> float:
    x, y = _shingles(a), _shingles(b)
    return len(x & y) / len(x | y)


def test_shards_are_slices_of_the_whole_file(tmp_path):
    whole = tmp_path / "whole.jsonl"
    write_webtext(whole, 30_000, words=20, truth=tmp_path / "whole.tsv")
    parts = []
    for k, first in enumerate((0, 10_000, 20_000)):
        part = tmp_path / f"part{k}.jsonl"
        write_webtext(part, 10_000, words=20, truth=tmp_path / f"part{k}.tsv", first=first)
        parts.append(part)
    assert b"".join(p.read_bytes() for p in parts) == whole.read_bytes()
    truths = b"".join((tmp_path / f"part{k}.tsv").read_bytes() for k in range(3))
    assert truths == (tmp_path / "whole.tsv").read_bytes()


def test_first_must_start_a_block():
    with pytest.raises(ValueError, match="multiple"):
        next(iter_webtext(10, first=5))


def test_planted_copies_are_near_duplicates_and_others_are_not():
    pages = list(iter_webtext(3_000, words=400, seed=3))
    by_url = {p.url: p for p in pages}
    copies = [p for p in pages if p.copy_of is not None]
    assert 0.07 < len(copies) / len(pages) < 0.13
    for page in copies[:50]:
        j = _jaccard(page.text, by_url[page.copy_of].text)
        assert 0.7 < j < 1.0, (page.url, j)
    originals = [p for p in pages if p.copy_of is None][:60]
    for a, b in zip(originals[::2], originals[1::2], strict=True):
        assert _jaccard(a.text, b.text) < 0.05
