"""`dedup` of Common Crawl's derived files: a WET's copy is its warcinfo and the `conversion`
records of its kept pages, one gzip member each, as Common Crawl wrote them; a WAT (metadata,
no pages) is left out and named on stderr with its reason. Every input is accounted for, in
a dedup of a finished run, of a folder and of files given one by one."""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import pytest
from ccwarc import Fetch, gzip_members, write_wat, write_wet
from conftest import shared_data
from typer.testing import CliRunner
from warcio.archiveiterator import ArchiveIterator

import neardup
from neardup.cli.main import app
from neardup.config import Settings
from neardup.ingest import iter_records
from neardup.pipeline.dedup import METADATA_ONLY, scan_and_deduplicate, write_deduplicated
from neardup.synth import SyntheticCrawl, page_rows


@cache
def _texts() -> list[tuple[str, str]]:
    """(url, text) of the pages of a small synthetic crawl: near-duplicates (edited copies,
    excerpts, copies on other hosts) and pages found once, each URL once."""
    rows = page_rows(SyntheticCrawl(n_docs=15, seed=5, n_unrelated=5).build(), "text")
    texts = [(r["url"], r["text"]) for r in rows]
    assert len({u for u, _ in texts}) == len(texts)
    return texts


@pytest.fixture
def cc(tmp_path: Path) -> Path:
    """A folder as Common Crawl publishes a segment's derived files: a WET and its WAT."""
    folder = tmp_path / "segment"
    folder.mkdir()
    texts = _texts()
    write_wet(folder / "seg.warc.wet.gz", texts)
    write_wat(folder / "seg.warc.wat.gz", [Fetch(url, f"<p>{t}</p>") for url, t in texts])
    return folder


def _cli(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, list(args))
    return res.exit_code, res.stdout, res.stderr


def _removed_urls(clean: Path) -> set[str]:
    return set((clean / "remove_urls.txt").read_text().split())


def _check_wet_copy(wet: Path, copy: Path, removed: set[str]) -> None:
    """The copy holds the WET's warcinfo and its conversion records less the removed ones,
    each record's bytes unchanged in a gzip member of its own, and both neardup's reader and
    warcio read it."""
    assert removed, "the WET's near-duplicates were found"
    given = {url for url, _ in _texts()}
    assert removed < given
    members = gzip_members(copy)
    assert all(m in gzip_members(wet) for m in members)  # the input's records, byte for byte
    with copy.open("rb") as fh:  # an independent reader
        records = [
            (r.rec_type, r.rec_headers.get_header("WARC-Target-URI")) for r in ArchiveIterator(fh)
        ]
    assert len(records) == len(members)
    assert records[0][0] == "warcinfo"
    assert [t for t, _ in records[1:]] == ["conversion"] * (len(given) - len(removed))
    assert {u for _, u in records[1:]} == given - removed
    ours = [(r.record_type, r.url) for r in iter_records([str(copy)])]
    assert [(t, u or None) for t, u in ours] == [(t, u or None) for t, u in records]
    # each text is there once: the copy scanned again has no near-duplicate left
    again = neardup.scan([copy], copy.parent.parent / f"rescan-{copy.parent.name}", workers=1)
    assert again.summary["clusters"] == 0
    assert again.summary["sketched"] == len(given) - len(removed)


def test_a_wet_is_written_without_its_removed_pages_and_a_wat_left_out(cc, tmp_path):
    run = neardup.scan([str(cc)], tmp_path / "run", Settings(extract_links=False), workers=1)
    assert run.summary["clusters"] > 0
    result = write_deduplicated(run.path, tmp_path / "clean")
    wet, wat = str(cc / "seg.warc.wet.gz"), str(cc / "seg.warc.wat.gz")
    assert [o.source for o in result.outcomes] == [wat, wet]  # every input accounted for
    assert result.not_written == {}
    assert result.left_out == {wat: METADATA_ONLY}
    assert list(result.files) == [wet]
    assert not (tmp_path / "clean" / "seg.warc.wat.gz").exists()
    assert result.removed == len(_removed_urls(result.out)) > 0
    _check_wet_copy(cc / "seg.warc.wet.gz", Path(result.files[wet]), _removed_urls(result.out))


@pytest.mark.parametrize("form", ["run", "folder", "files"])
def test_cli_names_the_wat_on_stderr_and_writes_the_wet(cc, tmp_path, form):
    wet, wat = cc / "seg.warc.wet.gz", cc / "seg.warc.wat.gz"
    clean = tmp_path / "clean"
    if form == "run":
        code, _, _ = _cli("scan", str(cc), "--out", str(tmp_path / "run"), "-q")
        assert code == 0
        given = ["--run", str(tmp_path / "run")]
    else:
        given = [str(cc)] if form == "folder" else [str(wet), str(wat)]
    code, out, err = _cli("dedup", *given, "--out", str(clean), "-q")
    assert code == 0
    assert err.strip().splitlines() == [f"left out: {wat}: {METADATA_ONLY}"]
    assert f"written: {wet}" in out and f"left out: {wat}" in out
    _check_wet_copy(wet, clean / wet.name, _removed_urls(clean))
    assert sorted(p.name for p in clean.iterdir() if p.suffix == ".gz") == [wet.name]

    code, out, err = _cli("dedup", *given, "--out", str(clean), "--force", "--json")
    assert code == 0
    files = {Path(f["input"]).name: f for f in json.loads(out)["files"]}
    assert files[wat.name] == {
        "input": str(wat),
        "given_as": str(cc) if form != "files" else str(wat),
        "written": False,
        "output": None,
        "records_kept": 0,
        "records_removed": 0,
        "note": None,
        "reason": METADATA_ONLY,
        "left_out": True,
    }
    removed = len(_removed_urls(clean))
    assert files[wet.name]["written"] and files[wet.name]["records_removed"] == removed
    # warcinfo and the kept pages
    assert files[wet.name]["records_kept"] == 1 + len(_texts()) - removed
    assert files[wet.name]["given_as"] == (str(cc) if form != "files" else str(wet))


def test_an_entry_that_cannot_be_read_is_named_with_its_reason(cc, tmp_path):
    """A FIFO in the crawl folder is a row of the scan and a file dedup cannot copy: it is
    named on stderr as not written, and the exit status says some file was not."""
    os.mkfifo(cc / "stuck.warc.gz")
    code, out, err = _cli("dedup", str(cc), "--out", str(tmp_path / "clean"), "--json")
    assert code == 3
    files = {Path(f["input"]).name: f for f in json.loads(out)["files"]}
    assert sorted(files) == ["seg.warc.wat.gz", "seg.warc.wet.gz", "stuck.warc.gz"]
    assert files["stuck.warc.gz"]["reason"] == "unreadable entry: a FIFO"
    assert not files["stuck.warc.gz"]["left_out"] and files["seg.warc.wet.gz"]["written"]
    assert f"not written: {cc / 'stuck.warc.gz'}: unreadable entry: a FIFO" in err
    assert f"left out: {cc / 'seg.warc.wat.gz'}: {METADATA_ONLY}" in err


@pytest.mark.realdata
def test_every_real_sample_is_accounted_for(tmp_path):
    """The real samples, as a folder: each file is written but the WAT, which is left out
    with its reason; the WET's copy holds its warcinfo and its kept conversion records."""
    folder = shared_data("warc")
    names = sorted(p.name for p in folder.iterdir())
    settings = Settings(extract_links=False, keep_text=False)
    scanned, direct = scan_and_deduplicate([folder], tmp_path / "clean", settings)
    again = write_deduplicated(scanned.path, tmp_path / "from-run")
    for result in (direct, again):
        assert sorted(Path(o.source).name for o in result.outcomes) == names
        assert result.not_written == {}
        assert result.left_out == {str(folder / "cc-whirlwind.warc.wat.gz"): METADATA_ONLY}
        assert len(result.files) == len(names) - 1
    # The WET's page is also in cc-whirlwind.warc.gz, whose response is its cluster's
    # representative: the WET's copy holds the conversions that stayed, here its warcinfo alone.
    wet = folder / "cc-whirlwind.warc.wet.gz"
    con = neardup.open_run(scanned.path)
    try:
        conversions = con.execute(
            "SELECT url, NOT (cluster_size >= 2 AND NOT is_representative) FROM pages "
            "WHERE source = ? AND record_type = 'conversion'",
            [str(wet)],
        ).fetchall()
    finally:
        con.close()
    assert conversions
    with Path(direct.files[str(wet)]).open("rb") as fh:
        records = [
            (r.rec_type, r.rec_headers.get_header("WARC-Target-URI")) for r in ArchiveIterator(fh)
        ]
    assert records[0][0] == "warcinfo"
    assert [u for t, u in records if t == "conversion"] == [u for u, kept in conversions if kept]
    assert {t for t, _ in records} <= {"warcinfo", "conversion"}
    wet_out = next(o for o in direct.outcomes if o.source == str(wet))
    assert wet_out.records_kept + wet_out.records_removed == len(gzip_members(wet))
