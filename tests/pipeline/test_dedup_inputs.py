"""`dedup` writes every input file it can, whatever form the scan was given its inputs in: a
folder of WARC and ARC files, a glob, a whole-file-gzip or zstd WARC (rewritten with one
member per record); a file it cannot write is named with its reason, the others are written."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from ccwarc import Fetch, gzip_members, write_warc
from fastwarc.stream_io import ZstdReader, ZstdWriter
from typer.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator

import neardup
from neardup.cli.main import app
from neardup.config import Settings

_VOCAB = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "pe", "ro", "su", "ti") for b in range(40)]


def _text(seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(_VOCAB) for _ in range(120))


def _html(seed: int) -> str:
    return f"<html><head><title>t{seed}</title></head><body><p>{_text(seed)}</p></body></html>"


def _arc(path: Path, pages: list[tuple[str, str]]) -> None:
    """An ARC v1 file as the Internet Archive wrote them: the filedesc record, then one
    record per page (header line, HTTP response, blank line)."""
    desc = b"1 0 InternetArchive\nURL IP-address Archive-date Content-type Archive-length\n"
    out = [
        b"filedesc://%s 0.0.0.0 20080509190241 text/plain %d\n%s\n"
        % (path.name.encode(), len(desc), desc)
    ]
    for url, html in pages:
        body = html.encode()
        block = b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n" + body
        out.append(
            b"%s 192.0.2.7 20080509190241 text/html %d\n%s\n" % (url.encode(), len(block), block)
        )
    path.write_bytes(b"".join(out))


def _one_stream(path: Path) -> None:
    """Rewrite a per-record-gzip WARC as one gzip stream, as ClueWeb09 is published."""
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())))


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """A folder as a crawl archive holds it: a request-first WARC (a.example, six pages),
    the same crawl's copies on b.example as one gzip stream and on c.example as an ARC."""
    crawl = tmp_path / "crawl"
    crawl.mkdir()
    write_warc(
        crawl / "a.warc.gz",
        [Fetch(f"http://a.example/p{i}.html", _html(i)) for i in range(6)],
        request_first=True,
    )
    write_warc(
        crawl / "b.warc.gz",
        [Fetch(f"http://b.example/p{i}.html", _html(i)) for i in range(3)]
        + [Fetch(f"http://b.example/own{i}.html", _html(100 + i)) for i in range(2)],
        request_first=True,
    )
    _one_stream(crawl / "b.warc.gz")
    _arc(crawl / "c.arc", [(f"http://c.example/p{i}.html", _html(i)) for i in range(3, 6)])
    return crawl


def _rescanned_clean(result: neardup.DedupResult, tmp_path: Path) -> dict:
    """Scan the written copies again: no near-duplicates may be left among them."""
    run = neardup.scan(sorted(result.files.values()), tmp_path / "rescan", workers=1)
    return run.summary


def test_a_folder_of_warc_arc_and_one_stream_gzip_is_written_file_by_file(mixed, tmp_path):
    run = neardup.scan([str(mixed)], tmp_path / "run", Settings(extract_links=False), workers=1)
    assert run.summary["clusters"] == 6  # each a.example page with its b or c copy
    result = neardup.write_deduplicated(run.path, tmp_path / "clean")

    assert result.not_written == {}
    assert sorted(
        Path(p).relative_to(tmp_path / "clean").as_posix() for p in result.files.values()
    ) == ["a.warc.gz", "b.warc.gz", "c.arc"]
    assert all(o.given_as == str(mixed) for o in result.outcomes)
    assert result.removed == 6
    assert (
        sum(o.records_removed for o in result.outcomes)
        == result.removed + result.companions_removed
    )
    # the ARC stays an ARC
    assert (tmp_path / "clean" / "c.arc").read_bytes().startswith(b"filedesc://c.arc ")
    # the one-stream file: one gzip member per record, each record's bytes unchanged
    notes = result.notes
    assert list(notes) == [str(mixed / "b.warc.gz")]
    assert "one gzip member per record" in notes[str(mixed / "b.warc.gz")]
    members = gzip_members(tmp_path / "clean" / "b.warc.gz")
    b = next(o for o in result.outcomes if o.source == str(mixed / "b.warc.gz"))
    assert len(members) == b.records_kept > 0
    assert all(m.startswith(b"WARC/1.") for m in members)
    original = gzip.decompress((mixed / "b.warc.gz").read_bytes())
    assert all(m in original for m in members)
    with (tmp_path / "clean" / "b.warc.gz").open("rb") as fh:
        assert sum(1 for _ in ArchiveIterator(fh)) == len(members)  # warcio reads it
    # what is left has no near-duplicate pair and holds every kept page
    again = _rescanned_clean(result, tmp_path)
    assert again["clusters"] == 0
    assert again["sketched"] == result.kept == 6 + 5 + 3 - 6


def test_a_glob_the_shell_did_not_expand_is_written_per_matching_file(mixed, tmp_path):
    pattern = str(mixed / "*.warc.gz")
    run = neardup.scan([pattern], tmp_path / "run", Settings(extract_links=False), workers=1)
    result = neardup.write_deduplicated(run.path, tmp_path / "clean")
    assert result.not_written == {}
    assert sorted(result.files) == [str(mixed / "a.warc.gz"), str(mixed / "b.warc.gz")]
    assert _rescanned_clean(result, tmp_path)["clusters"] == 0


def test_a_zstd_warc_is_written_one_frame_per_record(mixed, tmp_path):
    src = tmp_path / "a.warc.zst"
    plain = gzip.decompress((mixed / "a.warc.gz").read_bytes())
    with src.open("wb") as fh:  # one zstd frame for the whole file
        writer = ZstdWriter(fh, fsspec_args=False)
        writer.write(plain)
        writer.close()
    inputs = [src, mixed / "b.warc.gz"]
    run = neardup.scan(inputs, tmp_path / "run", Settings(extract_links=False), workers=1)
    result = neardup.write_deduplicated(run.path, tmp_path / "clean")
    assert result.not_written == {}
    out = Path(result.files[str(src)])
    assert "zstd frame per record" in result.notes[str(src)]
    frames = out.read_bytes().count(b"\x28\xb5\x2f\xfd")
    zst = next(o for o in result.outcomes if o.source == str(src))
    assert frames == zst.records_kept
    with out.open("rb") as fh:
        written = ZstdReader(fh, fsspec_args=False).read(-1)
    assert written.count(b"WARC/1.") == zst.records_kept
    assert _rescanned_clean(result, tmp_path)["clusters"] == 0


def test_a_run_from_before_record_offset_is_still_written(mixed, tmp_path):
    """Runs written before the byte offset became `record_offset` call it `offset`."""
    run = neardup.scan([str(mixed)], tmp_path / "run", Settings(extract_links=False), workers=1)
    pages = run.path / "pages.parquet"
    table = pq.read_table(pages)
    names = ["offset" if n == "record_offset" else n for n in table.column_names]
    pq.write_table(table.rename_columns(names), pages)
    assert "record_offset" not in pq.read_schema(pages).names
    result = neardup.write_deduplicated(run.path, tmp_path / "clean")
    assert result.not_written == {} and len(result.files) == 3
    assert _rescanned_clean(result, tmp_path)["clusters"] == 0


def _cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def test_cli_writes_the_others_names_the_missing_and_exits_3(mixed, tmp_path):
    run = tmp_path / "run"
    neardup.scan([str(mixed)], run, Settings(extract_links=False), workers=1)
    (mixed / "c.arc").unlink()  # moved away after the scan
    code, out, err = _cli("dedup", "--run", str(run), "--out", str(tmp_path / "clean"), "--json")
    assert code == 3
    files = {Path(f["input"]).name: f for f in json.loads(out)["files"]}
    assert files["c.arc"]["written"] is False and files["c.arc"]["output"] is None
    assert files["c.arc"]["reason"] == "no such file or directory"
    assert files["a.warc.gz"]["written"] and Path(files["a.warc.gz"]["output"]).is_file()
    assert files["b.warc.gz"]["written"] and files["b.warc.gz"]["note"]
    assert not (tmp_path / "clean" / "c.arc").exists()
    lines = err.strip().splitlines()
    assert f"not written: {mixed / 'c.arc'}: " in err and len(lines) == 2
    assert any(line.startswith(f"note: {mixed / 'b.warc.gz'}: ") for line in lines)


def test_cli_exits_1_when_no_file_could_be_written_and_0_when_all_were(mixed, tmp_path):
    run = tmp_path / "run"
    neardup.scan([str(mixed)], run, Settings(extract_links=False), workers=1)
    code, out, err = _cli("dedup", "--run", str(run), "--out", str(tmp_path / "clean"))
    assert code == 0 and "not written" not in out + err
    assert out.count("written: ") == 3
    for f in mixed.iterdir():
        f.unlink()
    code, out, err = _cli("dedup", "--run", str(run), "--out", str(tmp_path / "c2"), "--json")
    assert code == 1
    assert [f["written"] for f in json.loads(out)["files"]] == [False, False, False]
    assert err.count("not written: ") == 3
