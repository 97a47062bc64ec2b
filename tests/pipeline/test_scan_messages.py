"""What a scan says at its end about inputs that were damaged or gave no page: a truncated or
damaged file is named on stderr with where and why (the exit status stays 0), and an input
that gave no page is named with its commonest real skip reason, not its request records'."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path

import pytest
from damaged_warcs import page
from typer.testing import CliRunner
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from neardup.cli.main import app
from neardup.store import open_run


def _scan(*args: str) -> tuple[int, str, str]:
    res = CliRunner().invoke(app, ["scan", *args, "-q", "--workers", "1"])
    return res.exit_code, res.stdout, res.stderr


def _unreadable(run: Path) -> list[tuple[int, str]]:
    con = open_run(run)
    try:
        return con.execute(
            "SELECT record_offset, skipped_reason FROM pages "
            "WHERE skipped_reason LIKE 'unreadable record%' ORDER BY 1"
        ).fetchall()
    finally:
        con.close()


def _warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning: ")]


@pytest.mark.parametrize("compressed", [True, False])
def test_a_truncated_warc_is_named_with_its_cause_and_the_scan_still_succeeds(
    tmp_path: Path, compressed: bool
) -> None:
    records = [page(i) for i in range(6)]
    whole = b"".join(gzip.compress(r) for r in records) if compressed else b"".join(records)
    cut = tmp_path / ("half.warc.gz" if compressed else "half.warc")
    cut.write_bytes(whole[: len(whole) // 2 + 150])  # a download cut short, mid-record
    code, out, err = _scan(str(cut), "-o", str(tmp_path / "run"), "--json")
    assert code == 0  # the pages before the cut are a usable scan
    assert json.loads(out)["sketched"] == 3
    [(offset, reason)] = _unreadable(tmp_path / "run")
    detail = reason.removeprefix("unreadable record: ")
    assert "truncated" in detail
    assert _warnings(err) == [f"warning: {cut}: unreadable record at byte {offset}: {detail}"]


def test_a_damaged_gzip_member_is_named_and_the_records_after_it_are_read(tmp_path: Path):
    members = [gzip.compress(page(i)) for i in range(6)]
    broken = bytearray(members[2])
    broken[30:40] = b"\xff" * 10  # bit rot inside the third record's deflate data
    members[2] = bytes(broken)
    path = tmp_path / "rot.warc.gz"
    path.write_bytes(b"".join(members))
    good = tmp_path / "good.warc.gz"
    good.write_bytes(b"".join(gzip.compress(page(100 + i)) for i in range(2)))
    code, out, err = _scan(str(good), str(path), "-o", str(tmp_path / "run"), "--json")
    assert code == 0 and json.loads(out)["sketched"] == 2 + 5
    member_start = sum(len(m) for m in members[:2])
    [(offset, reason)] = _unreadable(tmp_path / "run")
    assert offset == member_start
    [line] = _warnings(err)
    assert line.startswith(f"warning: {path}: unreadable record at byte {member_start}: ")
    assert line.endswith(reason.removeprefix("unreadable record: "))
    assert str(good) not in err  # an intact input is not named


def _office_documents(path: Path) -> Path:
    """A request-first WARC of a site's downloads: a request and a response per fetch, none
    of them a page neardup compares (five kinds of office and image files, one 404)."""
    types = [
        "application/rtf",
        "text/csv",
        "application/zip",
        "image/png",
        "application/vnd.ms-excel",
    ]
    buf = io.BytesIO()
    writer = WARCWriter(buf, gzip=True)
    fetches = [(f"http://docs.example/f{i}", ctype, "200 OK") for i, ctype in enumerate(types)]
    fetches.append(("http://docs.example/gone", "text/html", "404 Not Found"))
    for url, ctype, status in fetches:
        body = b"<html><body>gone</body></html>" if status.startswith("404") else b"\x00\x01bin"
        http = StatusAndHeaders(status, [("Content-Type", ctype)], protocol="HTTP/1.1")
        response = writer.create_warc_record(
            url, "response", payload=io.BytesIO(body), http_headers=http, length=len(body)
        )
        request = writer.create_warc_record(
            url,
            "request",
            payload=io.BytesIO(b""),
            http_headers=StatusAndHeaders(
                "GET / HTTP/1.1", [("Host", "docs.example")], is_http_request=True
            ),
            warc_headers_dict={
                "WARC-Concurrent-To": response.rec_headers.get_header("WARC-Record-ID")
            },
        )
        writer.write_record(request)
        writer.write_record(response)
    path.write_bytes(buf.getvalue())
    return path


EXPECTED = (
    "5 responses skipped: unsupported content type "
    "(application/rtf, application/vnd.ms-excel, application/zip, ...)"
)


def test_an_input_without_pages_is_named_by_its_commonest_real_skip(tmp_path: Path) -> None:
    docs = _office_documents(tmp_path / "docs.warc.gz")
    good = tmp_path / "good.warc.gz"
    good.write_bytes(b"".join(gzip.compress(page(i)) for i in range(3)))
    # beside a good input: a note (on stderr, stdout being no terminal here)
    code, _, err = _scan(str(good), str(docs), "-o", str(tmp_path / "both"))
    assert code == 0
    assert f"no page could be read from 1 input(s): {docs}: {EXPECTED}" in err
    assert "request record" not in err  # six requests, but no page was expected of them
    # alone: the scan finds nothing and says why
    code, _, err = _scan(str(docs), "-o", str(tmp_path / "alone"))
    assert code == 1
    assert f"no usable page could be read from the input: {docs}: {EXPECTED}" in err
    # and where an earlier run stands, which an empty scan does not replace
    code, _, err = _scan(str(docs), "-o", str(tmp_path / "both"), "--force")
    assert code == 1
    assert f"({docs}: {EXPECTED}); {tmp_path / 'both'} still holds its previous run" in err


def test_a_run_without_skips_is_not_reopened_for_its_inputs_problems(tmp_path: Path) -> None:
    """The scan's end asks the run which inputs are damaged or gave no page only when its
    summary counts a skipped record: without one, the answer read from the run is empty
    too, an empty input among the others included."""
    from neardup.pipeline.scan import input_problems

    pages = tmp_path / "pages.jsonl"
    pages.write_text(
        "".join(
            json.dumps({"url": f"https://a.example/{i}", "text": f"page {i} words"}) + "\n"
            for i in range(3)
        )
    )
    (tmp_path / "empty.jsonl").write_text("")
    code, out, _ = _scan(
        str(pages), str(tmp_path / "empty.jsonl"), "-o", str(tmp_path / "run"), "--json"
    )
    assert code == 0 and json.loads(out)["skipped"] == 0
    read = input_problems(tmp_path / "run")
    assert (read.damaged, read.pageless) == ([], [])
    assert input_problems(tmp_path / "run", skipped=0) == read
    # with skips, the run is read: a truncated WARC is named
    cut = tmp_path / "half.warc"
    whole = b"".join(page(i) for i in range(4))
    cut.write_bytes(whole[: len(whole) // 2 + 150])
    code, out, _ = _scan(str(cut), "-o", str(tmp_path / "cut"), "--json")
    skipped = json.loads(out)["skipped"]
    assert code == 0 and skipped > 0
    assert [
        line.split(":")[0] for line in input_problems(tmp_path / "cut", skipped=skipped).damaged
    ] == [str(cut)]
