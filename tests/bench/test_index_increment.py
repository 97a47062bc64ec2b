"""bench/index_increment.py's split of a corpus: the base and the increment are the corpus's
lines in order, each once, whatever the number of files."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import index_increment


@pytest.mark.parametrize("parts", [1, 2, 3, 7])
def test_the_base_and_the_increment_are_the_corpus_in_order(tmp_path, parts):
    src = tmp_path / "web.jsonl"
    lines = [f'{{"url": "https://x.test/{i}", "text": "t{i}"}}\n'.encode() for i in range(23)]
    src.write_bytes(b"".join(lines))
    base = index_increment.split_lines(src, tmp_path / "base", 0, 1, last=20)
    inc = index_increment.split_lines(src, tmp_path / "inc", 20, parts)
    assert base[0].read_bytes() == b"".join(lines[:20])
    assert len(inc) == parts
    assert b"".join(p.read_bytes() for p in inc) == b"".join(lines[20:])
