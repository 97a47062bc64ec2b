"""The shared table printer (`cli/output.py`) on a terminal and on a pipe: URLs on one line,
shortened in the middle in a terminal table and whole on a pipe; "none found" for no rows."""

from __future__ import annotations

import io
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest
from rich.console import Console
from typer.testing import CliRunner

from neardup.cli import output
from neardup.cli.main import app
from neardup.cli.output import emit_table, shorten_url

LONG = "https://docs.example.org/reference/3.11/library/" + "x" * 60 + "/tarfile.TarFile.html"


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch):
    """Results printed to an 80-column terminal (a Rich console that says it is one); the
    returned function reads what was printed."""
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=80, color_system=None)
    monkeypatch.setattr(output, "out_console", console)
    return buffer.getvalue


@pytest.mark.parametrize("width", [20, 24, 40, 60, 79, len(LONG)])
def test_a_shortened_url_keeps_its_host_and_the_end_of_its_path(width: int) -> None:
    short = shorten_url(LONG, width)
    assert len(short) == min(width, len(LONG))
    if width >= len(LONG):
        assert short == LONG
        return
    assert short.count("…") == 1
    head, tail = short.split("…")
    assert LONG.startswith(head) and LONG.endswith(tail)
    if width >= 40:  # room for the host and some of the path
        assert head == "https://docs.example.org"
        assert tail.endswith("tarfile.TarFile.html") or LONG.endswith(tail)


def test_a_url_too_long_for_its_host_is_cut_in_the_middle() -> None:
    url = "https://" + "a" * 40 + ".example/page.html"
    short = shorten_url(url, 21)
    assert len(short) == 21 and short.startswith("https://") and short.endswith(".html")


def test_a_long_url_stays_on_one_line_in_a_terminal_table(terminal) -> None:
    emit_table(
        "pages",
        ["doc", "url", "title"],
        [[1, LONG, "A title of several words, as pages have them"], [2, "https://a.example/", "x"]],
        frozenset({"doc"}),
    )
    lines = terminal().splitlines()
    assert max(len(line) for line in lines) <= 80
    row = next(line for line in lines if "https://docs" in line)
    cell = re.search(r"https://\S+", row).group(0)
    assert "…" in cell
    head, tail = cell.split("…")
    assert head == "https://docs.example.org" and LONG.endswith(tail) and len(tail) >= 8
    assert "https://a.example/" in terminal()  # a URL that fits is whole
    # the URL's line is the only one with any of it: nothing wrapped onto the next line
    assert sum("example.org" in line or "TarFile" in line for line in lines) == 1


def test_the_same_rows_on_a_pipe_keep_the_whole_url(capsys) -> None:
    emit_table("pages", ["doc", "url"], [[1, LONG]], frozenset({"doc"}))
    assert capsys.readouterr().out.splitlines() == ["doc\turl", f"1\t{LONG}"]


def test_no_rows_say_none_found_on_a_terminal(terminal) -> None:
    emit_table("mirrored hosts in run", ["host a", "host b"], [], frozenset())
    assert terminal().strip() == "mirrored hosts in run: none found"


def test_no_rows_on_a_pipe_are_the_header_alone(capsys) -> None:
    emit_table("mirrored hosts in run", ["host a", "host b"], [], frozenset())
    assert capsys.readouterr().out == "host_a\thost_b\n"


def test_clusters_at_80_columns_keep_every_url_on_one_line(demo_run, terminal) -> None:
    """The members of the largest cluster in an 80-column terminal: each URL on its row's
    line, whole or with its middle shortened, and every line within 80 columns."""
    con = duckdb.connect()
    biggest, size = con.execute(
        "SELECT cluster_id, size FROM read_parquet(?) ORDER BY size DESC, cluster_id LIMIT 1",
        [str(demo_run.path / "clusters.parquet")],
    ).fetchone()
    urls = [
        u
        for (u,) in con.execute(
            "SELECT url FROM read_parquet(?) WHERE cluster_id = ?",
            [str(demo_run.path / "pages.parquet"), biggest],
        ).fetchall()
    ]
    result = CliRunner().invoke(app, ["clusters", str(demo_run.path), "--cluster", str(biggest)])
    assert result.exit_code == 0, result.output
    lines = terminal().splitlines()
    assert max(len(line) for line in lines) <= 80
    cells = [m.group(0) for line in lines for m in re.finditer(r"https?://\S+", line)]
    assert len(cells) == size
    for cell in cells:
        head, _, tail = cell.partition("…")
        assert any(u == cell or (u.startswith(head) and u.endswith(tail)) for u in urls), cell


def test_empty_clusters_say_none_found(demo_run, terminal) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["clusters", str(demo_run.path), "--top", "0"])
    assert result.exit_code == 0
    assert terminal().strip() == f"largest near-duplicate clusters in {demo_run.path}: none found"


def test_empty_clusters_on_a_pipe_and_in_json(demo_run) -> None:
    runner = CliRunner()
    result = runner.invoke(app, ["clusters", str(demo_run.path), "--top", "0"])
    assert result.output == "cluster\tpages\thosts\ttexts\tmin_sim\turl\ttitle\n"
    result = runner.invoke(app, ["clusters", str(demo_run.path), "--top", "0", "--json"])
    assert json.loads(result.output) == []


@pytest.mark.skipif(sys.platform != "linux", reason="a pseudo-terminal")
def test_clusters_in_a_real_80_column_terminal(demo_run) -> None:
    """`neardup clusters RUN` with its stdout on a pseudo-terminal 80 columns wide, as a
    person runs it: no URL is cut over two lines."""
    leader, follower = pty.openpty()
    env = {**os.environ, "COLUMNS": "80", "LINES": "50", "TERM": "xterm", "NO_COLOR": "1"}
    neardup = Path(sys.executable).with_name("neardup")
    with subprocess.Popen(
        [str(neardup), "clusters", str(demo_run.path), "--top", "10"],
        stdout=follower,
        stderr=subprocess.PIPE,
        env=env,
    ) as proc:
        os.close(follower)
        chunks = []
        while True:
            try:
                chunk = os.read(leader, 65536)
            except OSError:  # the terminal closed with the process
                break
            if not chunk:
                break
            chunks.append(chunk)
        assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    os.close(leader)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", b"".join(chunks).decode("utf-8"))
    lines = text.replace("\r", "").splitlines()
    assert max(len(line) for line in lines) <= 80
    rows = [line for line in lines if re.match(r"^\W*\d+ ", line)]
    assert len(rows) == 10
    assert all(re.search(r"https?://\S+", row) for row in rows)
    # a URL that went on over the next line would leave part of it on a row of its own
    assert not any(re.search(r"\.html\b", line) and not re.search(r"://", line) for line in lines)


def test_an_empty_rollup_says_none_found(demo_run, terminal, tmp_path, monkeypatch) -> None:
    """`rollup` prints its own list on a terminal, and says none found as the tables do."""
    from neardup.cli import linkgraph

    monkeypatch.setattr(linkgraph, "out_console", output.out_console)
    empty = tmp_path / "ranked.txt"
    empty.write_text("", encoding="utf-8")
    result = CliRunner().invoke(app, ["rollup", str(demo_run.path), str(empty)])
    assert result.exit_code == 0, result.output
    assert terminal().strip() == "rolled-up results: none found"


def test_an_empty_rollup_on_a_pipe_is_the_header_alone(demo_run, tmp_path) -> None:
    empty = tmp_path / "ranked.txt"
    empty.write_text("", encoding="utf-8")
    result = CliRunner().invoke(app, ["rollup", str(demo_run.path), str(empty)])
    assert result.exit_code == 0 and result.output == "rank\turl\trole\tgroup\ttitle\n"
