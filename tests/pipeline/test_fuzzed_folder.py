"""A folder of fuzzed archives, as a damaged crawl delivers them, scans to the end: the run is
written, its summary printed, every input accounted for, and no traceback.

Three archives are written as crawlers publish them (a Common Crawl request-first WARC with
metadata records and a redirect, an uncompressed WARC with chunked bodies, and the crawl of a
site that moved, all redirects), then mutated a hundred times: bytes flipped, spans cut, spans
inserted and spans repeated. Issue 50 found a folder of this kind ending the scan in a
`TypeError` while it named an input that gave no page for a kind of skip without details
("redirect (HTTP 3xx)")."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from ccwarc import Fetch, write_warc
from damaged_warcs import mutate, page

from neardup.store import open_run

MUTANTS = 100


def _sources(folder: Path) -> list[bytes]:
    """The three archives the mutants are made from, in real layouts."""
    words = [f"word{k}" for k in range(14)]
    fetches = [
        Fetch(
            f"https://site{i % 3}.example/page/{i}",
            "<html><body><p>"
            + " ".join(words[(i + k) % len(words)] for k in range(120))
            + f" page {i}</p></body></html>",
        )
        for i in range(12)
    ]
    fetches.append(Fetch("https://site0.example/old", status=301, location="/page/1"))
    cc = write_warc(folder / "cc.warc.gz", fetches, request_first=True).read_bytes()
    chunked = b"".join(
        page(
            i,
            body=b"%x\r\n%s\r\n0\r\n\r\n" % (len(text), text),
            headers=[("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")],
        )
        for i, text in (
            (i, f"<p>{' '.join(words)} {i} {' '.join(reversed(words))}</p>".encode())
            for i in range(8)
        )
    )
    moved = [  # a site that moved: every fetch a redirect, so the file gives no page
        Fetch(f"https://old.example/{i}", status=301, location=f"https://new.example/{i}")
        for i in range(4)
    ]
    gone = write_warc(folder / "moved.warc.gz", moved, request_first=True).read_bytes()
    return [cc, chunked, gone]


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("fuzz")
    folder = work / "crawl"
    folder.mkdir()
    rng = random.Random(50)
    sources = _sources(work)
    for k in range(MUTANTS):
        source = sources[k % 3]
        name = f"mutant-{k:03d}.warc" if k % 3 == 1 else f"mutant-{k:03d}.warc.gz"
        (folder / name).write_bytes(mutate(source, rng))
    return folder


def test_a_fuzzed_folder_scans_to_the_end_with_every_input_accounted_for(
    fuzzed: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "neardup.cli.main", "scan", str(fuzzed), "--out", str(run)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 0, done.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["sketched"] > 0
    con = open_run(run)
    try:
        sources = {
            Path(s).name for (s,) in con.execute("SELECT DISTINCT source FROM pages").fetchall()
        }
        unsketched_without_reason = con.execute(
            "SELECT count(*) FROM pages WHERE n_tokens IS NULL AND skipped_reason IS NULL"
        ).fetchone()
    finally:
        con.close()
    assert sources == {p.name for p in fuzzed.iterdir()}  # every input is in the run
    assert unsketched_without_reason == (0,)  # each record: a page, or why not
    named = [line for line in done.stderr.splitlines() if line.startswith("warning: ")]
    assert named, "a damaged crawl names its damaged inputs"
    assert all(line.split(": ")[1].startswith(str(fuzzed)) for line in named), named
