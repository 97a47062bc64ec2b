"""The service's OpenAPI document against the server: schemathesis, every check, on loopback.

A real uvicorn server runs in a thread on 127.0.0.1 (a free port) over an empty store, and
the schemathesis command line (`st run --checks all`) fuzzes each operation from the
published schema: no 5xx, no status code, content type, header or body outside the schema,
no schema-valid request rejected and no schema-violating one accepted. Bounded: a fixed seed,
40 examples per operation in each generating phase, and a 300 s limit on the run
(`NEARDUP_FUZZ_SEED` and `NEARDUP_FUZZ_EXAMPLES` change the first two for a longer hunt).

Two rules of the index cannot be written in JSON Schema, so a hook drops the bodies that
break them (each has its own 422 test in test_api_door.py): a page redirecting to itself, and
`links_in` alone for a page the index does not hold. `negative_data_rejection` also counts 413
as a rejection: a body of 10,001 URLs is refused by the door's size cap before its length is
validated.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from door_server import TOKEN, running

HOOKS = '''
import schemathesis


@schemathesis.hook
def filter_case(context, case):
    """Drop page batches breaking a rule JSON Schema cannot state (see the test's docstring)."""
    body = case.body
    pages = body.get("pages") if isinstance(body, dict) else None
    if not isinstance(pages, list):
        return True
    for page in pages:
        if not isinstance(page, dict):
            continue
        if "redirect_to" in page and page.get("redirect_to") == page.get("url"):
            return False
        if "links_in" in page and not {"text", "html", "redirect_to"} & page.keys():
            return False
    return True
'''

CONFIG = """
[checks.negative_data_rejection]
expected-statuses = [
    "400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429",
]
"""


@pytest.mark.timeout(400)
def test_schemathesis_finds_nothing(tmp_path: Path) -> None:
    (tmp_path / "fuzz_hooks.py").write_text(HOOKS)
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    env = {
        **os.environ,
        "PYTHONPATH": str(tmp_path),
        "SCHEMATHESIS_HOOKS": "fuzz_hooks",
        "NO_COLOR": "1",
    }
    with running(tmp_path / "store") as base:
        cmd = [
            sys.executable,
            "-m",
            "schemathesis.cli",
            "--config-file",
            str(tmp_path / "schemathesis.toml"),
            "run",
            f"{base}/api/openapi.json",
            "--checks",
            "all",
            "--phases",
            "examples,coverage,fuzzing",
            "--max-examples",
            os.environ.get("NEARDUP_FUZZ_EXAMPLES", "40"),
            "--seed",
            os.environ.get("NEARDUP_FUZZ_SEED", "1"),
            "-H",
            f"Authorization: Bearer {TOKEN}",
        ]
        done = subprocess.run(
            cmd, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path
        )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    assert "6/6" in out  # every operation was selected and tested
