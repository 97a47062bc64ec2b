"""The web UI's OpenAPI document against the UI: schemathesis, every check, on loopback.

A real uvicorn server runs in a thread on 127.0.0.1 (a free port) over a copy of the shared
demo run, and the schemathesis command line (`st run --checks all`) fuzzes each operation of
`/api/openapi.json`, the JSON API and the HTML views alike: no 5xx, no status, content type,
header or body outside the document, no schema-valid request rejected, and a 405 with the
`Allow` header for every method the document does not list. Bounded: a fixed seed and 20
examples per operation in each generating phase (`NEARDUP_FUZZ_SEED`,
`NEARDUP_FUZZ_EXAMPLES` for a longer hunt). No setting and no filter: schemathesis's defaults.

Plain tests beside it pin what the fuzzer found before: the 404s of a missing cluster, page
or compared text are listed in the document (JSON for the API, the error page for a view),
and every 405 carries `Allow`.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest
from door_server import TOKEN, serving

from neardup.ui import create_app


def _fuzz(url: str, cwd: Path, *args: str, examples: int = 20) -> subprocess.CompletedProcess[str]:
    """`st run` with every check; run in `cwd`, where it keeps its cache (not the repo)."""
    cmd = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "run",
        f"{url}/api/openapi.json",
        "--checks",
        "all",
        "--phases",
        "examples,coverage,fuzzing,stateful",
        "--max-examples",
        os.environ.get("NEARDUP_FUZZ_EXAMPLES", str(examples)),
        "--seed",
        os.environ.get("NEARDUP_FUZZ_SEED", "1"),
        *args,
    ]
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=240, env=env, cwd=cwd)


@pytest.mark.timeout(300)
def test_schemathesis_finds_nothing(server, tmp_path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="neardup.access")
    done = _fuzz(server, tmp_path)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-6000:]
    paths = httpx.get(f"{server}/api/openapi.json").json()["paths"]
    n = sum(len(methods) for methods in paths.values())
    assert f"{n}/{n}" in out  # every operation was selected and tested
    # What the run met (access-log lines "client method path status bytes ms"): the 404 of
    # a missing item and the 405 of an undeclared method, both checked by schemathesis.
    statuses = {r.getMessage().split()[3] for r in caplog.records if r.name == "neardup.access"}
    assert {"200", "404", "405", "422"} <= statuses


@pytest.mark.timeout(300)
def test_schemathesis_finds_nothing_with_a_token(ui_run, tmp_path) -> None:
    """With a token every request needs it: the document then lists 401 and 403 as well."""
    with serving(create_app(ui_run, token=TOKEN)) as url:
        doc = httpx.get(f"{url}/api/openapi.json", headers={"Authorization": f"Bearer {TOKEN}"})
        done = _fuzz(url, tmp_path, "-H", f"Authorization: Bearer {TOKEN}", examples=5)
        refused = httpx.get(f"{url}/api/summary")
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    for op in (m for methods in doc.json()["paths"].values() for m in methods.values()):
        assert {"401", "403", "421", "429"} <= set(op["responses"])
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Basic")


def test_missing_items_answer_the_404_the_document_lists(server, ui_run) -> None:
    doc = httpx.get(f"{server}/api/openapi.json").json()["paths"]
    clusters = pq.read_table(ui_run / "clusters.parquet", columns=["cluster_id"])
    no_cluster = max(clusters["cluster_id"].to_pylist()) + 1
    pages = pq.read_table(ui_run / "pages.parquet", columns=["doc_id"])
    no_page = max(pages["doc_id"].to_pylist()) + 1
    cases = [
        ("/api/cluster/{cluster_id}", f"/api/cluster/{no_cluster}", "application/json"),
        ("/api/page/{doc_id}", f"/api/page/{no_page}", "application/json"),
        ("/api/diff", f"/api/diff?a={no_page}&b=0", "application/json"),
        ("/cluster/{cluster_id}", f"/cluster/{no_cluster}", "text/html"),
        ("/page/{doc_id}", f"/page/{no_page}", "text/html"),
        ("/diff", f"/diff?a=0&b={no_page}", "text/html"),
        ("/collection/{cid}", f"/collection/{no_cluster}", "text/html"),
    ]
    for template, path, media in cases:
        r = httpx.get(f"{server}{path}")
        assert r.status_code == 404, path
        assert r.headers["content-type"].startswith(media), path
        assert media in doc[template]["get"]["responses"]["404"]["content"], template
        if media == "application/json":
            assert (
                str(no_page if "page" in path or "diff" in path else no_cluster)
                in (r.json()["detail"])
            )


def test_every_405_carries_allow(server) -> None:
    """`Allow` names what the path answers: GET for the app's routes, GET and HEAD for the
    document itself (a plain Starlette route, which answers HEAD too)."""
    for method, path, allow in (
        ("TRACE", "/", "GET"),
        ("POST", "/api/summary", "GET"),
        ("DELETE", "/api/cluster/1", "GET"),
        ("PUT", "/page/1", "GET"),
        ("PATCH", "/api/diff?a=0&b=0", "GET"),
        ("POST", "/api/openapi.json", "GET, HEAD"),
    ):
        r = httpx.request(method, f"{server}{path}")
        assert (r.status_code, r.headers.get("allow")) == (405, allow), (method, path)
    assert httpx.head(f"{server}/api/openapi.json").status_code == 200
