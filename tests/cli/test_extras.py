"""A plain install (no `[service]` extra) scans, dedups and reports; `serve` and `ui` say
which extra to install. FastAPI and uvicorn are hidden from a fresh interpreter by putting
None in `sys.modules`, which makes their import fail as if they were not installed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BLOCKED = "import sys\nfor m in ('fastapi', 'uvicorn', 'starlette'):\n    sys.modules[m] = None\n"


def _neardup(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    code = BLOCKED + (
        f"from neardup.cli.main import app\napp({list(args)!r}, prog_name='neardup')\n"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )


def test_scan_dedup_and_report_need_no_service_extra(demo_crawl, tmp_path: Path) -> None:
    warc = str(demo_crawl.warc_paths[0])
    done = _neardup(tmp_path, "scan", warc, "--out", "run", "--json", "-q")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["sketched"] > 0
    done = _neardup(tmp_path, "dedup", "--run", "run", "--out", "clean")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "clean" / Path(warc).name).is_file()
    done = _neardup(tmp_path, "report", "run", "-o", "report.html", "--no-avoid")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "report.html").stat().st_size > 1000


def test_serve_and_ui_name_the_missing_extra(demo_run, tmp_path: Path) -> None:
    for args in (["serve", str(tmp_path / "store")], ["ui", str(demo_run.path)]):
        done = _neardup(tmp_path, *args)
        assert done.returncode == 2, done.stderr
        assert "pip install 'neardup[service]'" in done.stderr
        assert "Traceback" not in done.stderr
