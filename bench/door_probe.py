"""What a 200 MB chunked upload costs the service: peak RSS of a server subprocess and the
body bytes the client had sent when the answer came (the door's figures in docs/service.md).

    .venv/bin/python bench/door_probe.py                 # the current door
    git show HEAD~N:src/neardup/service/api.py > /tmp/old_api.py
    .venv/bin/python bench/door_probe.py --api /tmp/old_api.py   # an older api.py, to compare

Two probes against a fresh store on 127.0.0.1: POST /pages without a token, then with the
token (a body far over the 10 MB cap). The client (tests/door_server.py) sends the body chunk
by chunk only while no answer has arrived.
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from door_server import free_port, send_streaming

SERVER = """
import importlib.util, sys, uvicorn
api, store, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if api == "-":
    from neardup.service.api import create_service_app
else:
    spec = importlib.util.spec_from_file_location("old_api", api)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    create_service_app = mod.create_service_app
uvicorn.run(create_service_app(store, "T"), host="127.0.0.1", port=port, log_level="error")
"""


def peak_mb(pid: int) -> float:
    """The process's peak resident set (VmHWM), MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM"):
            return int(line.split()[1]) / 1024
    return float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--api", default="-", help="an api.py file to serve instead of neardup's")
    ap.add_argument("--mb", type=int, default=200, help="body size, MiB")
    args = ap.parse_args()
    port = free_port()
    store = Path(tempfile.mkdtemp(prefix="door-probe-")) / "store"
    proc = subprocess.Popen([sys.executable, "-c", SERVER, args.api, str(store), str(port)])
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.1)
        base = f"http://127.0.0.1:{port}"
        total = args.mb << 20
        for name, headers in (("no token", {}), ("token", {"Authorization": "Bearer T"})):
            before = peak_mb(proc.pid)
            ans = send_streaming(base, "POST", "/pages", headers, total, wait_first=1.0)
            time.sleep(0.5)  # let the server finish whatever it still reads
            print(
                f"{name}: {ans.status}, client had sent {ans.sent / 2**20:.1f} MiB of "
                f"{args.mb}, server peak RSS +{peak_mb(proc.pid) - before:.0f} MB"
            )
    finally:
        proc.terminate()
        proc.wait(10)


if __name__ == "__main__":
    main()
