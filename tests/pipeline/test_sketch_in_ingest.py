"""The embedded engine sketches pages in the ingest's workers when nothing of the crawl is
needed to sketch a page (no common-shingle filter): the files it writes are those of the
separate sketch pass over the stored text, byte for byte, on every kind of input; a JSONL
file goes to the workers as places in the file, whose blocks are the bytes the reading
process saw, also past a line over the cap."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from neardup.config import Settings
from neardup.ingest import tables
from neardup.ingest.input_ranges import RANGE_BYTES_VARIABLE
from neardup.ingest.tables import LineBlock, LineSpan, iter_jsonl_blocks
from neardup.pipeline.executors.local import LocalEngine
from neardup.pipeline.steps import sketch as sketch_step
from neardup.pipeline.steps.ingest_ranges import run_ingest
from neardup.pipeline.steps.sketch import _AppendedRows, run_sketch, sketches_in_ingest
from tests.ccwarc import Fetch, write_warc

WORDS = ("the", "quick", "brown", "fox", "jumps", "over", "a", "lazy", "dog", "while", "seven")


def _text(rng: np.random.Generator, n: int) -> str:
    return " ".join(WORDS[i] for i in rng.integers(0, len(WORDS), n))


def _inputs(folder: Path) -> list[str]:
    """JSONL with near-duplicate, short, empty, bad and over-long lines (the cap of the
    settings below), a blank line, and no final newline; a request-first WARC."""
    rng = np.random.default_rng(3)
    base = _text(rng, 300)
    lines = []
    for i in range(400):
        text = base if i % 7 == 0 else _text(rng, 40 + i % 90)
        lines.append(json.dumps({"url": f"https://s{i % 5}.example/p/{i}", "text": text}))
    lines[10] = '{"url": "https://bad.example/", "text": "no end'
    lines[11] = ""
    lines[12] = json.dumps({"url": "https://short.example/", "text": "two words"})
    lines[13] = json.dumps({"url": "https://empty.example/", "text": "   "})
    lines[200] = json.dumps({"url": "https://long.example/", "text": "x " * 60_000})
    jsonl = folder / "pages.jsonl"
    jsonl.write_text("\n".join(lines), encoding="utf-8")
    fetches = [
        Fetch(f"https://w.example/{i}", f"<html><body><p>{_text(rng, 120)}</p></body></html>")
        for i in range(30)
    ]
    fetches.append(Fetch("https://w.example/moved", status=301, location="https://w.example/0"))
    warc = write_warc(folder / "crawl.warc.gz", fetches, request_first=True)
    return [str(jsonl), str(warc)]


SETTINGS = Settings(max_payload_bytes=20_000, min_tokens=10)


def _files(staging: Path) -> dict[str, bytes]:
    names = ("signatures.npy", "supershingles.npy", "signature_docs.npy")
    return {name: (staging / name).read_bytes() for name in names}


@pytest.mark.parametrize("workers", [1, 2])
@pytest.mark.parametrize("range_bytes", [None, 20_000])
def test_sketching_in_the_ingest_writes_the_sketch_pass_files(
    tmp_path: Path, workers: int, range_bytes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sketch rows the workers write into their place of the shared matrices (ranges
    of the input, `ingest_ranges.py`) are the sketch pass's files, byte for byte."""
    monkeypatch.setattr(tables, "BLOCK_BYTES", 4096)  # many blocks, spans and bytes
    if range_bytes is not None:
        monkeypatch.setenv(RANGE_BYTES_VARIABLE, str(range_bytes))
    monkeypatch.setattr(sketch_step, "SKETCH_ROWS", 100)  # several row groups
    inputs = _inputs(tmp_path)
    assert sketches_in_ingest(SETTINGS)
    during, after = tmp_path / "during", tmp_path / "after"
    during.mkdir()
    after.mkdir()
    with LocalEngine(workers) as engine:
        got = run_ingest(inputs, during, SETTINGS, engine, sketch=True)
        plain = run_ingest(inputs, after, SETTINGS, engine)
        want = run_sketch(after, SETTINGS, engine, lambda n: None)
    assert plain.sketched is None and got.sketched is not None
    assert got.sketched.sketched == want.sketched == got.with_text > 400
    for name in ("doc_ids", "eligible", "shingle_fp", "lexical_fp"):
        assert np.array_equal(getattr(got.sketched, name), getattr(want, name)), name
    assert not got.sketched.eligible.all() and got.sketched.eligible.sum() > 300
    assert _files(during) == _files(after)
    left, right = (pq.read_table(f / "sketches.parquet") for f in (during, after))
    assert left.equals(right)
    assert left.schema.field("minhash").type.list_size == SETTINGS.num_perm
    signatures = np.load(during / "signatures.npy")
    widened = signatures.astype(np.uint64).view(np.int64)
    assert np.array_equal(np.stack(left.column("minhash").to_numpy(zero_copy_only=False)), widened)
    texts = pq.read_table(during / "page_text.parquet")
    assert np.array_equal(texts.column("doc_id").to_numpy(), got.sketched.doc_ids)


def test_a_common_shingle_filter_keeps_the_sketch_pass() -> None:
    assert not sketches_in_ingest(Settings(max_shingle_df=1000))


@pytest.mark.parametrize(("rows", "width"), [(0, 128), (1001, 84), (7, 0)])
def test_appended_rows_write_the_npy_numpy_writes(tmp_path: Path, rows: int, width: int) -> None:
    values = np.random.default_rng(2).integers(0, 2**32, size=(rows, width), dtype=np.uint32)
    out = _AppendedRows(tmp_path / "w.npy", np.uint32, width)
    for start in range(0, rows, 300):
        out.append(values[start : start + 300])
    out.close()
    np.save(tmp_path / "ref.npy", values)
    assert (tmp_path / "w.npy").read_bytes() == (tmp_path / "ref.npy").read_bytes()


def test_spans_read_back_the_blocks_the_reader_cut(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every block of a plain file is named by its place up to a line over the cap; the
    blocks after that line carry their bytes; a span reads exactly its block's bytes."""
    monkeypatch.setattr(tables, "BLOCK_BYTES", 1024)
    path = Path(_inputs(tmp_path)[0])
    blocks = [b for b in iter_jsonl_blocks(str(path), 20_000) if isinstance(b, LineBlock)]
    spans = [b.span() for b in blocks]
    placed = [s for s in spans if isinstance(s, LineSpan)]
    assert 0 < len(placed) < len(spans)  # the over-long line ends the spans
    assert spans[len(placed)] is blocks[len(placed)]
    for span, block in zip(placed, blocks, strict=False):
        assert span.block().data == block.data
        assert span.block().first_line == block.first_line
    gz = tmp_path / "pages.jsonl.gz"

    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert all(
        b.span() is b for b in iter_jsonl_blocks(str(gz), 20_000) if isinstance(b, LineBlock)
    )
