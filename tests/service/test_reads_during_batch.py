"""A read that finds the index locked by a batch waits off the event loop."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
from door_server import serving

from neardup.service import PageUpdate, ServiceIndex
from neardup.service.api import create_service_app


def test_status_waits_for_a_batch_and_the_server_keeps_answering(tmp_path):
    text = " ".join(f"w{i}" for i in range(60))
    with ServiceIndex(tmp_path / "s") as ix:
        ix.apply([PageUpdate("http://a/1", text=text)])
        with serving(create_service_app(ix, "t", rate=None)) as base:
            assert httpx.get(f"{base}/status", params={"url": "http://a/1"}).status_code == 200
            ix.lock.acquire()  # as an update batch holds it
            held = True
            try:
                with ThreadPoolExecutor(1) as pool:
                    waiting = pool.submit(
                        httpx.get, f"{base}/status", params={"url": "http://a/1"}, timeout=30
                    )
                    time.sleep(0.3)
                    # the event loop is free: a request that needs no lock is answered
                    assert httpx.get(f"{base}/api/openapi.json", timeout=5).status_code == 200
                    assert not waiting.done()
                    ix.lock.release()
                    held = False
                    r = waiting.result(timeout=30)
            finally:
                if held:
                    ix.lock.release()
            assert r.status_code == 200 and r.json()["url"] == "http://a/1"
