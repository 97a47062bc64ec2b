"""No command or API call deletes, truncates or overwrites a file it did not write.

Each case runs the real command line (or API call) on a generated crawl and then checks,
byte for byte, that the inputs and the user's own files are still there."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import neardup
from neardup.cli.main import app
from neardup.store.outputs import MARKER, OutputError, replacing_folder

README = Path(__file__).resolve().parents[2] / "README.md"


def _digests(folder: Path) -> dict[str, str]:
    """Every file under `folder` (hidden ones included) and the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture()
def crawl(demo_crawl, tmp_path: Path) -> Path:
    """A user's folder: the demo WARC files, a note and a sub-folder of their own."""
    folder = tmp_path / "crawl"
    shutil.copytree(demo_crawl.warc_dir, folder)
    (folder / "notes.txt").write_text("my notes\n", encoding="utf-8")
    (folder / "sub").mkdir()
    (folder / "sub" / "keep.me").write_bytes(b"\x00\x01 mine")
    return folder


def _run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def _warcs(folder: Path) -> list[str]:
    return [str(p) for p in sorted(folder.glob("*.warc.gz"))]


def test_dedup_into_the_input_folder_is_refused_and_changes_nothing(crawl: Path) -> None:
    before = _digests(crawl)
    code, out = _run("dedup", *_warcs(crawl), "--out", str(crawl), "-q")
    assert code == 2
    assert "contains the input" in out
    assert _digests(crawl) == before


def test_dedup_into_the_input_folder_with_force_is_refused_too(crawl: Path) -> None:
    before = _digests(crawl)
    code, _ = _run("dedup", *_warcs(crawl), "--out", str(crawl), "--force", "-q")
    assert code == 2
    assert _digests(crawl) == before


def test_scan_force_into_the_input_folder_keeps_everything(crawl: Path) -> None:
    before = _digests(crawl)
    code, out = _run("scan", _warcs(crawl)[0], "--out", str(crawl), "--force", "-q")
    assert code == 2
    assert "refusing to write" in out
    assert _digests(crawl) == before


def test_scan_force_on_a_folder_neardup_did_not_write_is_refused(crawl: Path, tmp_path) -> None:
    mine = tmp_path / "myown"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work\n", encoding="utf-8")
    code, out = _run("scan", _warcs(crawl)[0], "--out", str(mine), "--force", "-q")
    assert code == 2
    assert "did not write" in out
    assert (mine / "thesis.tex").read_text(encoding="utf-8") == "years of work\n"
    assert sorted(p.name for p in mine.iterdir()) == ["thesis.tex"]


def test_out_dot_is_refused_without_a_traceback(crawl: Path, tmp_path, monkeypatch) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    code, out = _run("scan", _warcs(crawl)[0], "--out", ".", "--force", "-q")
    assert code == 2
    assert "the folder you are in" in out
    assert "Traceback" not in out
    assert list(here.iterdir()) == []


def test_output_inside_an_input_folder_is_refused(crawl: Path) -> None:
    before = _digests(crawl)
    code, out = _run("scan", str(crawl), "--out", str(crawl / "run"), "-q")
    assert code == 2
    assert "inside the input" in out
    assert _digests(crawl) == before


def test_a_symlink_to_the_input_folder_is_the_input_folder(crawl: Path, tmp_path) -> None:
    link = tmp_path / "link-to-crawl"
    link.symlink_to(crawl, target_is_directory=True)
    before = _digests(crawl)
    code, out = _run("dedup", *_warcs(crawl), "--out", str(link), "--force", "-q")
    assert code == 2
    assert "contains the input" in out
    assert _digests(crawl) == before


def test_an_input_reached_through_a_symlink_is_still_an_input(crawl: Path, tmp_path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    os.rename(crawl, out / "crawl")  # the real files now live inside the output folder...
    (tmp_path / "crawl").symlink_to(out / "crawl", target_is_directory=True)
    before = _digests(out)
    code, _ = _run("dedup", *_warcs(tmp_path / "crawl"), "--out", str(out), "-q")
    assert code == 2  # ...so writing there would overwrite them
    assert _digests(out) == before


def test_force_replaces_a_run_neardup_wrote(crawl: Path, tmp_path) -> None:
    run = tmp_path / "run"
    assert _run("scan", _warcs(crawl)[0], "--out", str(run), "-q")[0] == 0
    assert (run / MARKER).is_file()
    code, out = _run("scan", _warcs(crawl)[1], "--out", str(run), "-q")
    assert code == 2
    assert "--force" in out
    assert _run("scan", _warcs(crawl)[1], "--out", str(run), "--force", "-q")[0] == 0
    summary = neardup.open_run(run).sql("SELECT DISTINCT source FROM pages").fetchall()
    assert summary == [(_warcs(crawl)[1],)]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".run.")]  # no leftovers


def test_a_run_of_another_kind_is_not_replaced(crawl: Path, tmp_path) -> None:
    run = tmp_path / "run"
    assert _run("scan", _warcs(crawl)[0], "--out", str(run), "-q")[0] == 0
    before = _digests(run)
    code, out = _run("demo-crawl", str(run), "--pages", "30", "--force")
    assert code == 2
    assert "holds a neardup run" in out
    assert _digests(run) == before


def test_dedup_writes_beside_and_force_replaces_its_own_output(crawl: Path, tmp_path) -> None:
    before = _digests(crawl)
    clean = tmp_path / "clean"
    assert _run("dedup", *_warcs(crawl), "--out", str(clean), "-q")[0] == 0
    assert (clean / "scan" / MARKER).is_file()
    assert sorted(p.name for p in clean.glob("*.warc.gz")) == [Path(w).name for w in _warcs(crawl)]
    assert _run("dedup", *_warcs(crawl), "--out", str(clean), "-q")[0] == 2
    assert _run("dedup", *_warcs(crawl), "--out", str(clean), "--force", "-q")[0] == 0
    assert _digests(crawl) == before


def test_dedup_of_a_run_may_not_write_into_the_run(crawl: Path, tmp_path) -> None:
    run = tmp_path / "run"
    assert _run("scan", *_warcs(crawl), "--out", str(run), "-q")[0] == 0
    before = _digests(run)
    code, out = _run("dedup", "--run", str(run), "--out", str(run / "clean"))
    assert code == 2
    assert "inside the input" in out
    assert _digests(run) == before


def test_report_never_overwrites_a_file_it_did_not_write(crawl: Path, tmp_path) -> None:
    run = tmp_path / "run"
    assert _run("scan", *_warcs(crawl), "--out", str(run), "-q")[0] == 0
    page = tmp_path / "index.html"
    page.write_text("<html>my homepage</html>", encoding="utf-8")
    code, out = _run("report", str(run), "-o", str(page), "--force", "--no-avoid")
    assert code == 2
    assert "neardup did not write it" in out
    assert page.read_text(encoding="utf-8") == "<html>my homepage</html>"
    report = tmp_path / "report.html"
    assert _run("report", str(run), "-o", str(report), "--no-avoid")[0] == 0
    assert _run("report", str(run), "-o", str(report), "--no-avoid")[0] == 2
    assert _run("report", str(run), "-o", str(report), "--no-avoid", "--force")[0] == 0
    code, out = _run("report", str(run), "-o", str(run / "report.html"), "--no-avoid")
    assert code == 2
    assert "inside the input" in out


def test_demo_crawl_force_replaces_only_a_demo_crawl(tmp_path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "a.txt").write_text("a", encoding="utf-8")
    assert _run("demo-crawl", str(mine), "--pages", "30", "--force")[0] == 2
    assert (mine / "a.txt").read_text(encoding="utf-8") == "a"
    demo = tmp_path / "demo"
    assert _run("demo-crawl", str(demo), "--pages", "30")[0] == 0
    first = _digests(demo)
    assert _run("demo-crawl", str(demo), "--pages", "30", "--seed", "1")[0] == 2
    assert _run("demo-crawl", str(demo), "--pages", "30", "--seed", "1", "--force")[0] == 0
    assert _digests(demo) != first


def test_service_add_refuses_a_user_folder_and_an_input_folder(crawl: Path, tmp_path) -> None:
    before = _digests(crawl)
    code, out = _run("add", str(crawl), _warcs(crawl)[0])
    assert code == 2
    assert "contains the input" in out
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "a.txt").write_text("a", encoding="utf-8")
    code, out = _run("add", str(mine), _warcs(crawl)[0])
    assert code == 2
    assert "did not write" in out
    assert sorted(p.name for p in mine.iterdir()) == ["a.txt"]
    assert _digests(crawl) == before


def test_store_of_crawls_refuses_a_user_folder(crawl: Path, tmp_path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "a.txt").write_text("a", encoding="utf-8")
    code, out = _run("crawl", _warcs(crawl)[0], "--label", "w1", "--store", str(mine))
    assert code == 2
    assert "did not write" in out
    assert sorted(p.name for p in mine.iterdir()) == ["a.txt"]


def test_a_failure_while_writing_leaves_the_previous_output(tmp_path) -> None:
    out = tmp_path / "out"
    with replacing_folder(out, "run") as staging:
        (staging / "first.txt").write_text("1", encoding="utf-8")
    with pytest.raises(RuntimeError), replacing_folder(out, "run", force=True) as staging:
        (staging / "second.txt").write_text("2", encoding="utf-8")
        raise RuntimeError("disk full")
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "first.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


def test_api_refuses_with_output_error(crawl: Path) -> None:
    with pytest.raises(OutputError, match="contains the input"):
        neardup.scan(_warcs(crawl), crawl, force=True)


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_python_examples_run_as_saved_scripts(demo_crawl, tmp_path) -> None:
    """Every Python block of the README, saved as a file and run with `python file.py`
    (no `__main__` guard), in a folder holding a `crawl.warc.gz`: it must exit 0."""
    blocks = _python_blocks(README.read_text(encoding="utf-8"))
    assert blocks, "the README has Python examples"
    shutil.copy(demo_crawl.warc_paths[0], tmp_path / "crawl.warc.gz")
    for i, block in enumerate(blocks):
        script = tmp_path / f"example_{i}.py"
        script.write_text(block, encoding="utf-8")
        for attempt in range(2):  # twice: a second run must replace the first's outputs
            done = subprocess.run(
                [sys.executable, script.name],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, f"block {i}, run {attempt}:\n{done.stderr[-3000:]}"
    assert (tmp_path / "crawl.warc.gz").read_bytes() == demo_crawl.warc_paths[0].read_bytes()


def _dead_pid() -> int:
    """A process id that is certainly not running: a child that has exited and been reaped."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_the_next_writer_cleans_what_a_killed_one_left(tmp_path) -> None:
    out = tmp_path / "run"
    with replacing_folder(out, "run") as staging:
        (staging / "v1.txt").write_text("1", encoding="utf-8")
    dead = _dead_pid()
    leftover = tmp_path / f".run.staging-{dead}"
    leftover.mkdir()
    (leftover / "half.parquet").write_bytes(b"half")
    alive = tmp_path / f".run.staging-{os.getpid()}-x"  # not ours to judge: another name
    alive.mkdir()
    with replacing_folder(out, "run", force=True) as staging:
        (staging / "v2.txt").write_text("2", encoding="utf-8")
    assert not leftover.exists()
    assert alive.exists()
    assert sorted(p.name for p in out.iterdir()) == [MARKER, "v2.txt"]


def test_an_output_moved_away_by_a_killed_publish_is_put_back(tmp_path) -> None:
    """Where publishing needs two renames, a kill between them leaves `.NAME.old-PID` and
    nothing at NAME; the next writer restores it before deciding anything."""
    out = tmp_path / "run"
    with replacing_folder(out, "run") as staging:
        (staging / "v1.txt").write_text("1", encoding="utf-8")
    moved = tmp_path / f".run.old-{_dead_pid()}"
    out.rename(moved)
    # the restored run is there again, so replacing it without force is refused
    with pytest.raises(OutputError, match="--force"), replacing_folder(out, "run"):
        pass
    assert not moved.exists()
    assert (out / "v1.txt").read_text(encoding="utf-8") == "1"


def test_replacing_swaps_in_the_new_folder_and_leaves_nothing_beside(tmp_path) -> None:
    out = tmp_path / "run"
    with replacing_folder(out, "run") as staging:
        (staging / "v1.txt").write_text("1", encoding="utf-8")
    first_inode = out.stat().st_ino
    with replacing_folder(out, "run", force=True) as staging:
        (staging / "v2.txt").write_text("2", encoding="utf-8")
    assert out.stat().st_ino != first_inode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def _processes_with(mark: str) -> list[int]:
    """Live processes whose environment carries `mark` (the scan and its workers)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().split(") ", 1)[1][0]
        except OSError:
            continue
        if mark.encode() in environ and state != "Z":
            found.append(int(proc.name))
    return found


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc")
def test_a_killed_scan_leaves_no_workers_and_its_debris_is_cleaned(demo_crawl, tmp_path) -> None:
    import signal
    import time
    import uuid

    mark = f"NEARDUP_TEST_MARK={uuid.uuid4().hex}"
    env = {**os.environ, mark.split("=")[0]: mark.split("=")[1]}
    out = tmp_path / "run"
    code = (
        "import neardup, sys\n"
        f"neardup.scan({[str(p) for p in demo_crawl.warc_paths]!r}, {str(out)!r}, workers=2)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], env=env)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not list(tmp_path.glob(".run.staging-*")):
        time.sleep(0.05)
    time.sleep(1.0)  # let the workers start
    assert len(_processes_with(mark)) >= 2, "the scan had started its workers"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 20
    while _processes_with(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _processes_with(mark) == []
    assert list(tmp_path.glob(".run.staging-*")), "SIGKILL left the staging folder"
    assert not out.exists()
    neardup.scan([demo_crawl.warc_paths[0]], out, workers=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]


def test_an_empty_scan_never_replaces_a_run(demo_crawl, tmp_path) -> None:
    run = tmp_path / "run"
    assert _run("scan", str(demo_crawl.warc_paths[0]), "--out", str(run), "-q")[0] == 0
    before = _digests(run)
    empty = tmp_path / "empty.jsonl"
    empty.write_text('{"url": "http://x.org/", "text": ""}\n', encoding="utf-8")
    code, out = _run("scan", str(empty), "--out", str(run), "--force", "-q")
    assert code == 1
    assert "still holds its previous run" in out
    assert _digests(run) == before
