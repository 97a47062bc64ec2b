"""`neardup add` runs its kernels as one thread does: a call whose types were compiled ahead
runs ahead whatever its size (issue 50, item 4).

The side-by-side rule (`kernels/jit.py`, `AHEAD_MAX_BYTES`) sends a large call of a kernel that
threads may run in parallel to numba's JIT. In `neardup add` no two threads run kernels of size
(the index opens in a thread; the sketching beyond the first seconds is in processes), so the
rule only made the first batch's text (2.4 MB at 1,000 web pages) import numba and load its
kernels: 0.5-0.8 s of a 1 % increment of a million pages. Run in a fresh interpreter, as a
user runs the command, with every lookup of the module compiled ahead recorded."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

# Each lookup of the module compiled ahead, with the process's limit for threads side by
# side (`jit._max_bytes`): where no module is current (a kernel edited since the build), the
# first lookup starts the JIT and no other follows, so the limit is read at every lookup.
_RECORDED = """
import os, sys
from neardup.kernels import ahead, jit
lookup = ahead.lookup
def recorded(kernel, args, work, max_bytes):
    # Told at once (`add` ends without teardown), a line in one write (two threads look up).
    line = 'ASKED ' + repr((kernel, max_bytes, jit._max_bytes)) + chr(10)
    os.write(2, line.encode())
    return lookup(kernel, args, work, max_bytes)
ahead.lookup = recorded
sys.argv = ['neardup', *sys.argv[1:]]
from neardup.cli.main import main
main()
"""


def _pages(path: Path, n: int) -> Path:
    """`n` pages of 300 distinct words each (2 KB a page): one batch of them is more text
    than `AHEAD_MAX_BYTES`."""
    with path.open("w", encoding="utf-8") as f:
        for i in range(n):
            text = " ".join(f"w{i}x{j}" for j in range(300))
            f.write(json.dumps({"url": f"https://h{i % 7}.example/{i}", "text": text}) + "\n")
    return path


def _asked(*args: str) -> list[tuple[str, int | None, int | None]]:
    done = subprocess.run(
        [sys.executable, "-c", _RECORDED, *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [x[len("ASKED ") :] for x in done.stderr.splitlines() if x.startswith("ASKED ")]
    return [ast.literal_eval(x) for x in lines]


def test_add_runs_its_kernels_as_one_thread(tmp_path):
    from neardup.kernels.jit import AHEAD_MAX_BYTES

    pages = _pages(tmp_path / "pages.jsonl", 700)
    assert pages.stat().st_size > AHEAD_MAX_BYTES
    store = tmp_path / "index"
    for _ in range(2):  # a new index, then an increment of an existing one (opened in a thread)
        asked = _asked("add", str(store), str(pages), "--batch", "700", "--workers", "1")
        assert asked, "no kernel was looked up"
        assert {(limit, process) for _, limit, process in asked} == {(None, None)}, asked
