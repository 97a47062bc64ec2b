"""The command line's manners: version and short help, JSON and complete values for scripts,
bad values refused in the CLI's words, and Ctrl-C at any stage ending with status 130."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import pytest
from typer.testing import CliRunner

import neardup
from neardup.cli.main import app


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_version_and_short_help() -> None:
    code, out = _run("--version")
    assert code == 0 and out.strip() == f"neardup {neardup.__version__}"
    code, out = _run("scan", "-h")
    assert code == 0 and "--threshold" in out


def test_clusters_to_a_pipe_are_whole_tab_separated_rows(demo_run) -> None:
    """CliRunner's stdout is not a terminal: rows must be TSV with URLs never cut."""
    code, out = _run("clusters", str(demo_run.path), "--top", "1000")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split("\t") == ["cluster", "pages", "hosts", "texts", "min_sim", "url", "title"]
    con = duckdb.connect()
    expected = con.execute(
        "SELECT cluster_id, representative_url FROM read_parquet(?) ORDER BY size DESC, cluster_id",
        [str(demo_run.path / "clusters.parquet")],
    ).fetchall()
    got = [(int(r.split("\t")[0]), r.split("\t")[5]) for r in lines[1:]]
    assert got == [(c, u or "") for c, u in expected]


def test_clusters_and_summary_speak_json(demo_run) -> None:
    code, out = _run("clusters", str(demo_run.path), "--top", "3", "--json")
    assert code == 0
    rows = json.loads(out)
    assert len(rows) == 3 and {"cluster", "pages", "url"} <= set(rows[0])
    biggest = rows[0]["cluster"]
    code, out = _run("clusters", str(demo_run.path), "--cluster", str(biggest), "--json")
    members = json.loads(out)
    assert code == 0 and len(members) == rows[0]["pages"]
    assert sum(m["role"] == "representative" for m in members) == 1
    code, out = _run("summary", str(demo_run.path), "--json")
    assert code == 0 and json.loads(out)["clusters"] == demo_run.summary["clusters"]


def test_summary_to_a_pipe_is_key_value_lines(demo_run) -> None:
    code, out = _run("summary", str(demo_run.path))
    assert code == 0
    pairs = dict(line.split("\t", 1) for line in out.splitlines())
    assert int(pairs["clusters"]) == demo_run.summary["clusters"]
    assert int(pairs["sketched"]) == demo_run.summary["sketched"]


@pytest.mark.parametrize("workers", ["0", "-3"])
def test_workers_below_one_are_refused(demo_crawl, tmp_path, workers) -> None:
    code, out = _run(
        "scan", str(demo_crawl.warc_paths[0]), "--out", str(tmp_path / "r"), "--workers", workers
    )
    assert code == 2
    assert "--workers" in out
    assert not (tmp_path / "r").exists()


def test_too_many_demo_pages_is_one_line_in_the_cli_words(tmp_path) -> None:
    code, out = _run("demo-crawl", str(tmp_path / "d"), "--pages", "5000")
    assert code == 2
    assert "fewer pages (--pages)" in out
    assert "Traceback" not in out


@pytest.mark.skipif(sys.platform != "linux", reason="process groups and signals")
def test_ctrl_c_exits_130_with_one_line_and_leaves_the_old_run(demo_crawl, tmp_path) -> None:
    run = tmp_path / "run"
    neardup.scan([demo_crawl.warc_paths[0]], run, workers=1)
    before = sorted(p.name for p in run.iterdir())
    cmd = [sys.executable, "-c", "from neardup.cli.main import main; main()"]
    args = ["scan", *map(str, demo_crawl.warc_paths), "--out", str(run), "--force", "-q"]
    proc = subprocess.Popen(cmd + args, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(tmp_path.glob(".run.staging-*")):
        time.sleep(0.05)
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole group
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err
    assert err.strip().splitlines() == ["interrupted; earlier outputs are left as they were"]
    assert sorted(p.name for p in run.iterdir()) == before


def test_link_graph_tables_to_a_pipe_are_whole_rows(demo_run, tmp_path) -> None:
    """`mirrors` and `avoid-list` on a pipe: a header and one TSV row per result, the same
    rows as their `--json`, and the closing note kept off stdout."""
    out = tmp_path / "analyses"
    for command, key, fields in (
        ("mirrors", "pairs", ("host_a", "host_b")),
        ("avoid-list", "entries", ("prefix", "kept")),
    ):
        code, text = _run(command, str(demo_run.path), "--out", str(out), "--json")
        assert code == 0
        expected = [tuple(row[f] for f in fields) for row in json.loads(text)[key]]
        result = CliRunner().invoke(app, [command, str(demo_run.path), "--out", str(out)])
        assert result.exit_code == 0
        lines = result.stdout.splitlines()
        assert len(lines) == 1 + len(expected) and "\t" in lines[0]
        cols = {"mirrors": (0, 1), "avoid-list": (0, 2)}[command]
        got = [tuple(line.split("\t")[c] for c in cols) for line in lines[1:]]
        assert got == expected


def test_every_writing_command_speaks_json(demo_crawl, demo_run, tmp_path) -> None:
    """dedup, report, demo-crawl and crawl print what they wrote as JSON with --json."""
    code, out = _run("dedup", "--run", str(demo_run.path), "--out", str(tmp_path / "c"), "--json")
    assert code == 0
    done = json.loads(out)
    assert done["kept"] + done["removed"] > 0
    assert done["files"] and all(Path(f["output"]).is_file() for f in done["files"])
    code, out = _run(
        "report", str(demo_run.path), "-o", str(tmp_path / "r.html"), "--no-avoid", "--json"
    )
    assert code == 0 and json.loads(out)["bytes"] == (tmp_path / "r.html").stat().st_size
    code, out = _run("demo-crawl", str(tmp_path / "d"), "--pages", "30", "--json")
    assert code == 0 and all(Path(p).is_file() for p in json.loads(out)["warc_files"])
    args = ["crawl", str(demo_crawl.warc_paths[0]), "--label", "w1", "--store"]
    code, out = _run(*args, str(tmp_path / "s"), "--json")
    assert code == 0 and json.loads(out)["label"] == "w1"


def test_nothing_usable_names_each_file_and_its_reason(tmp_path) -> None:
    noise = tmp_path / "noise.warc.gz"
    noise.write_bytes(bytes(range(256)) * 20)
    empty = tmp_path / "empty.warc.gz"
    empty.write_bytes(b"")
    code, out = _run("scan", str(noise), str(empty), "--out", str(tmp_path / "r"), "-q")
    assert code == 1
    lines = [line for line in out.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: no usable page")
    assert "noise.warc.gz: not a WARC" in out and "empty.warc.gz: empty file" in out


def test_ui_and_serve_on_a_busy_port_say_so_before_announcing(demo_run, tmp_path) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        for args in (["ui", str(demo_run.path)], ["serve", str(tmp_path / "idx")]):
            code, out = _run(*args, "--port", port)
            assert code == 2, out
            assert f"cannot listen on 127.0.0.1:{port}" in out
            assert "on http://" not in out


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--num-perm", "0"], "error: --num-perm must be at least 1"),
        (["--max-shingle-df", "-1"], "error: --max-shingle-df must be >= 0"),
        (["--method", "simhash", "--hamming", "99"], "error: --hamming must be between 0 and 31"),
        (["--bands", "3"], "error: give both --bands and --rows, or neither"),
        (["--containment", "0.5"], "use --method broder-min or broder-mod"),
    ],
)
def test_refused_settings_name_the_options(demo_crawl, tmp_path, args, expected) -> None:
    code, out = _run("scan", str(demo_crawl.warc_paths[0]), "-o", str(tmp_path / "r"), *args)
    assert code == 2 and expected in out
    assert not any(field in out for field in ("num_perm", "max_shingle_df", "simhash_distance"))


def test_crawl_refuses_settings_in_the_same_words(demo_crawl, tmp_path) -> None:
    args = ["crawl", str(demo_crawl.warc_paths[0]), "-l", "w1", "--store", str(tmp_path / "s")]
    code, out = _run(*args, "--num-perm", "0")
    assert code == 2 and "error: --num-perm must be at least 1" in out


def test_add_speaks_json_and_tsv(demo_crawl, tmp_path) -> None:
    """`add` prints its totals like the other commands: JSON with --json, else one
    `what<TAB>value` row per figure under a header on a pipe."""
    store = str(tmp_path / "idx")
    code, out = _run("add", store, str(demo_crawl.warc_paths[0]), "--json")
    assert code == 0
    totals = json.loads(out)
    assert totals["index_pages"] > 0 and totals["new_pages"] > 0
    code, out = _run("add", store, str(demo_crawl.warc_paths[0]))
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "what\tvalue"
    again = dict(line.split("\t") for line in lines[1:])
    assert int(again["index_pages"]) == totals["index_pages"]  # the same page set, sent again
    assert int(again["new_pages"]) == 0
    assert int(again["resent_pages"]) == int(again["unchanged_pages"]) == totals["new_pages"]


INTERNAL_NAMES = ("tier1", "tier2", "tier2_all_pairs", "repaired", "recomputed", "comparisons")


def test_add_reports_in_plain_words(demo_crawl, tmp_path, monkeypatch) -> None:
    """`add`'s report names what it counts, on a terminal, on a pipe and in JSON: none of
    the index's internal counter names, the skips by reason, and the same figures in all."""
    import io

    from rich.console import Console

    from neardup.cli import output
    from neardup.cli.service import ADD_REPORT

    store = str(tmp_path / "idx")
    code, out = _run("add", store, *map(str, demo_crawl.warc_paths), "--json")
    assert code == 0
    report = json.loads(out)
    assert list(report) == [key for key, _, _ in ADD_REPORT]
    assert report["skipped"] == sum(report["skipped_by_reason"].values()) > 0
    assert report["skipped_by_reason"]["HTTP status 404"] > 0
    counts = list(report["skipped_by_reason"].values())
    assert counts == sorted(counts, reverse=True)
    assert not set(report) & set(INTERNAL_NAMES)
    assert report["new_pages"] == report["compared_pages"] > 0

    code, out = _run("add", store, str(demo_crawl.warc_paths[0]))
    assert code == 0
    keys = [line.split("\t")[0] for line in out.splitlines()[1:]]
    assert not set(keys) & set(INTERNAL_NAMES)
    assert "index_duplicate_groups" in keys and "skipped_by_reason.HTTP status 404" in keys

    buffer = io.StringIO()
    terminal = Console(file=buffer, force_terminal=True, width=100, color_system=None)
    monkeypatch.setattr(output, "out_console", terminal)
    code, _ = _run("add", store, str(demo_crawl.warc_paths[0]))
    assert code == 0
    shown = buffer.getvalue()
    for label in ("new pages", "pages in the index", "groups of two or more pages", "time"):
        assert f"│ {label} " in shown
    assert "skipped: HTTP status 404" in shown
    assert not any(re.search(rf"\b{name}\b", shown) for name in INTERNAL_NAMES)


def test_rollup_to_a_pipe_is_one_whole_row_per_url(demo_run, tmp_path) -> None:
    con = duckdb.connect()
    urls = [
        u
        for (u,) in con.execute(
            "SELECT url FROM read_parquet(?) WHERE cluster_id IS NOT NULL ORDER BY doc_id LIMIT 5",
            [str(demo_run.path / "pages.parquet")],
        ).fetchall()
    ]
    ranked = tmp_path / "ranked.txt"
    ranked.write_text("\n".join(urls) + "\n", encoding="utf-8")
    code, out = _run("rollup", str(demo_run.path), str(ranked), "--json")
    assert code == 0
    entries = json.loads(out)
    code, out = _run("rollup", str(demo_run.path), str(ranked))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split("\t") == ["rank", "url", "role", "group", "title"]
    rows = [line.split("\t") for line in lines[1:]]
    expected = [
        (str(e["rank"]), url)
        for e in entries
        for url in [e["url"], *e["more_pages"], *e["replicas"], *e["other_copies"]]
    ]
    assert [(r[0], r[1]) for r in rows] == expected
    assert {r[2] for r in rows} >= {"result", "other copy"}


def test_pipe_headers_are_names_a_script_can_use(demo_run, tmp_path) -> None:
    """No header cell starts a comment ('#') or carries brackets or spaces."""
    code, out = _run("collections", str(demo_run.path), "--out", str(tmp_path / "c"))
    assert code == 0
    header = out.splitlines()[0].split("\t")
    assert header[0] == "rank"
    code, out = _run("mirrors", str(demo_run.path), "--out", str(tmp_path / "m"))
    assert code == 0
    header = out.splitlines()[0].split("\t")
    assert all(cell.replace("_", "").isalnum() for cell in header), header


def test_a_bad_file_among_good_ones_is_named(demo_crawl, tmp_path) -> None:
    """The summary counts skips by reason; the files that gave no page at all are named
    in one closing line (on stderr when stdout is a pipe), each with its reason."""
    noise = tmp_path / "noise.warc.gz"
    noise.write_bytes(bytes(range(256)) * 20)
    empty = tmp_path / "empty.warc.gz"
    empty.write_bytes(b"")
    good = str(demo_crawl.warc_paths[0])
    args = ["scan", good, str(noise), str(empty), "--out", str(tmp_path / "r"), "-q"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "noise.warc" not in result.stdout  # stdout stays key<TAB>value lines
    notes = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(notes) == 1 and notes[0].startswith("no page could be read from 2 input(s):")
    assert f"{empty}: empty file" in notes[0] and f"{noise}: not a WARC" in notes[0]
    assert good not in notes[0]


def test_verbose_lists_the_files_and_the_settings_first(demo_crawl, tmp_path) -> None:
    """`-v` says which files a paths file's --shard picked, and the settings changed."""
    listing = tmp_path / "mine.paths"
    listing.write_text("".join(f"{p.name}\n" for p in demo_crawl.warc_paths), encoding="utf-8")
    base = str(demo_crawl.warc_paths[0].parent)
    args = ["scan", str(listing), "--paths-base", base, "--shard", "1/2", "--threshold", "0.85"]
    result = CliRunner().invoke(app, [*args, "-o", str(tmp_path / "r"), "-v", "-q"])
    assert result.exit_code == 0, result.output
    picked = demo_crawl.warc_paths[1::2]
    assert picked and len(picked) < len(demo_crawl.warc_paths)
    lines = result.stderr.splitlines()
    assert lines[: len(picked)] == [f"input: {base}/{p.name} (warc)" for p in picked]
    assert lines[len(picked)] == f"{len(picked)} input file(s); settings: threshold=0.85"
    assert "input:" not in result.stdout


def _terminal_output(monkeypatch, width: int = 100):
    """Results printed as to a terminal `width` wide; the function returned reads them."""
    import io

    from rich.console import Console

    from neardup.cli import output

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=width, color_system=None)
    monkeypatch.setattr(output, "out_console", console)
    monkeypatch.setattr("neardup.cli.summary.out_console", console)
    return buffer.getvalue


def test_summary_prints_as_the_scan_did(demo_crawl, tmp_path, monkeypatch) -> None:
    """`scan` and, later, `summary` print the same table: skips from the commonest down,
    stage times in the order the stages ran (summary.json keeps its keys sorted)."""
    from neardup.pipeline.stages import STAGES

    printed = _terminal_output(monkeypatch)
    run = tmp_path / "run"
    code, _ = _run("scan", *map(str, demo_crawl.warc_paths), "-o", str(run), "-q")
    assert code == 0
    scanned = printed()
    code, _ = _run("summary", str(run))
    assert code == 0
    summarised = printed()[len(scanned) :]
    assert summarised == scanned

    rows = [line.strip("│ ") for line in scanned.splitlines()]
    skips = [r for r in rows if r.startswith("skipped:")]
    counts = [int(r.rsplit("│", 1)[1].strip().replace(",", "")) for r in skips]
    assert len(skips) >= 3 and counts == sorted(counts, reverse=True)
    stages = [r.split("│")[0].split("time:")[1].strip() for r in rows if r.startswith("time:")]
    order = [s.key for s in STAGES] + ["store"]
    assert stages == sorted(stages, key=order.index) and stages[0] == "ingest"
    assert stages[-1] == "store"


def test_summary_on_a_pipe_has_no_none_and_keeps_the_order(demo_run) -> None:
    code, out = _run("summary", str(demo_run.path))
    assert code == 0
    assert "None" not in out
    pairs = [line.split("\t") for line in out.splitlines()]
    assert all(len(p) == 2 for p in pairs)
    values = dict(pairs)
    assert values["containment_pairs"] == ""  # no --containment: the figure does not apply
    skips = [int(v) for k, v in pairs if k.startswith("skipped_by_reason.")]
    assert skips == sorted(skips, reverse=True) and skips
    stages = [k.split(".", 1)[1] for k, _ in pairs if k.startswith("stage_seconds.")]
    assert stages[0] == "ingest" and stages[-1] == "store" and "sketch" in stages
    code, scanned = _run("summary", str(demo_run.path))
    assert scanned == out  # stable: the same lines each time


def _start_server(args: list[str]) -> tuple[subprocess.Popen[str], list[str]]:
    """A `neardup` server started on a free loopback port, with the lines it printed on
    stderr before serving (it is serving once its API docs answer)."""
    import socket
    import urllib.request

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    neardup = Path(sys.executable).with_name("neardup")
    proc = subprocess.Popen(
        [str(neardup), *args, "--host", "127.0.0.1", "--port", str(port), "--no-access-log"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    assert proc.stderr is not None
    while len(lines) < 3:
        line = proc.stderr.readline()
        if not line:
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("API docs:") and args[0] == "ui":
            break
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/docs", timeout=5) as r:
                assert r.status == 200
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, lines
            time.sleep(0.2)
    return proc, [*lines, str(port)]


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


@pytest.mark.skipif(sys.platform != "linux", reason="signals")
@pytest.mark.parametrize("token", [None, "s3cret-token"])
def test_serve_announces_its_address_docs_and_writes(tmp_path, token) -> None:
    """`neardup serve STORE` says, on stderr before serving, where it answers, where its
    docs are, and whether it takes writes (no token: read-only)."""
    args = ["serve", str(tmp_path / "idx"), *(["--token", token] if token else [])]
    proc, lines = _start_server(args)
    try:
        *said, port = lines
        url = f"http://127.0.0.1:{port}/"
        assert said[0] == f"neardup serve on {url} (Ctrl-C to stop)"
        assert said[1] == f"API docs: {url}api/docs"
        if token is None:
            assert said[2].startswith("read-only: no token, so POST and DELETE /pages are refused")
        else:
            assert "need the header Authorization: Bearer" in said[2]
            assert token not in said[2]
    finally:
        _stop(proc)


@pytest.mark.skipif(sys.platform != "linux", reason="signals")
def test_ui_announces_the_same_way(demo_run) -> None:
    proc, lines = _start_server(["ui", str(demo_run.path)])
    try:
        *said, port = lines
        assert said[0] == f"neardup ui on http://127.0.0.1:{port}/ (Ctrl-C to stop)"
        assert said[1] == f"API docs: http://127.0.0.1:{port}/api/docs"
    finally:
        _stop(proc)


@pytest.mark.parametrize(
    ("host", "url"),
    [
        ("127.0.0.1", "http://127.0.0.1:8787/"),
        ("0.0.0.0", "http://127.0.0.1:8787/"),
        ("::", "http://[::1]:8787/"),
        ("::1", "http://[::1]:8787/"),
        ("example.org", "http://example.org:8787/"),
    ],
)
def test_server_url(host: str, url: str) -> None:
    from neardup.cli.door import server_url

    assert server_url(host, 8787) == url
