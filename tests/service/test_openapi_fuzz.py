"""The service's OpenAPI document against the server: schemathesis, every check, on loopback.

A real uvicorn server runs in a thread on 127.0.0.1 (a free port) over an empty store, and
the schemathesis command line (`st run --checks all`) fuzzes each operation from the
published schema: no 5xx, no status code, content type, header or body outside the schema,
no schema-valid request rejected and no schema-violating one accepted. Bounded: a fixed seed,
40 examples per operation in each generating phase, and a 300 s limit on the run
(`NEARDUP_FUZZ_SEED` and `NEARDUP_FUZZ_EXAMPLES` change the first two for a longer hunt).

No request is filtered out. The two rules of the index that JSON Schema cannot state
(`links_in` alone for a URL the index does not hold, a page redirecting to itself) answer 404
and 409, which the document lists for `POST /pages` and schemathesis counts as a schema-valid
request handled, not rejected (each has its own test in test_api_door.py). The one setting:
`negative_data_rejection` also counts 413 as a rejection, since a body of 10,001 URLs of up
to 8192 characters is refused by the door's size cap before its length is validated.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from door_server import TOKEN, running

CONFIG = """
[checks.negative_data_rejection]
expected-statuses = [
    "400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429",
]
"""


@pytest.mark.timeout(400)
def test_schemathesis_finds_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="neardup.access")
    (tmp_path / "schemathesis.toml").write_text(CONFIG)
    env = {**os.environ, "NO_COLOR": "1"}
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
    # The fuzzer did send both rules, and got their documented statuses (access-log lines
    # "client method path status bytes ms").
    answers = {
        tuple(r.getMessage().split()[1:4]) for r in caplog.records if r.name == "neardup.access"
    }
    assert {("POST", "/pages", "404"), ("POST", "/pages", "409")} <= answers
