"""Reads inside the server answer from the last committed version while a batch computes
(`service/served.py`): they never wait for it, and never see half of it."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from door_server import serving

import neardup.index.service_index as index_module
from neardup.index.state.lookups import HERE
from neardup.service import PageUpdate, ServiceIndex
from neardup.service.api import create_service_app


def test_reads_answer_from_the_last_version_while_a_batch_computes(tmp_path, monkeypatch):
    text = " ".join(f"w{i}" for i in range(60))
    with ServiceIndex(tmp_path / "s") as ix:
        ix.apply([PageUpdate("http://a/1", text=text)])
        real = index_module.compute_batch
        computing, finish = threading.Event(), threading.Event()
        calls = []

        def slow(index, prepared, lookups=HERE):  # the writer copy computes until told
            calls.append(index)
            if len(calls) == 1:
                computing.set()
                assert finish.wait(30)
            return real(index, prepared, lookups)

        monkeypatch.setattr(index_module, "compute_batch", slow)
        app = create_service_app(ix, "t", rate=None)
        auth = {"Authorization": "Bearer t"}
        with serving(app) as base:
            before = httpx.get(f"{base}/status", params={"url": "http://a/1"}).json()
            assert before["is_duplicate"] is False
            copy = " ".join(f"w{i}" for i in range(59)) + " other"
            with ThreadPoolExecutor(1) as pool:
                posting = pool.submit(
                    httpx.post,
                    f"{base}/pages",
                    json={"pages": [{"url": "http://b/1", "text": copy}]},
                    headers=auth,
                    timeout=60,
                )
                assert computing.wait(30)  # the batch holds the writer's copy now
                t0 = time.perf_counter()
                during = httpx.get(f"{base}/status", params={"url": "http://a/1"}, timeout=5)
                missing = httpx.get(f"{base}/status", params={"url": "http://b/1"}, timeout=5)
                counts = httpx.get(f"{base}/", timeout=5).json()
                waited = time.perf_counter() - t0
                assert not posting.done()
                finish.set()
                assert posting.result(timeout=60).status_code == 200
            assert during.status_code == 200 and during.json() == before  # the last version
            assert missing.status_code == 404 and counts["pages"] == 1  # none of the batch
            assert waited < 5
            after_a = httpx.get(f"{base}/status", params={"url": "http://a/1"}).json()
            after_b = httpx.get(f"{base}/status", params={"url": "http://b/1"}).json()
            assert after_a["group_id"] == after_b["group_id"] is not None  # the new version
            assert httpx.get(f"{base}/", timeout=5).json()["pages"] == 2
            assert len(calls) == 2 and calls[0] is not calls[1]  # each copy computed it once
        app.state.index.close()
