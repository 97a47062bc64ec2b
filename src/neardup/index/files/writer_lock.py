"""The index's writer lock: one process writes a store (any number read), held as an OS
lock on a file that names its holder, so a second writer is refused with one line saying
who holds it, or waits for it.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

if sys.platform != "win32":
    import fcntl

from neardup.index.files.store import LOCK_NAME, IndexBusy


class WriterLock:
    """The store's one writer: an exclusive lock on `writer.lock` (`flock`; on Windows a
    byte range past the text), which holds the holder's PID and command line so that a
    refused writer can say who holds it. The kernel drops the lock when its process ends,
    however it ends: a killed writer never leaves a stale lock."""

    def __init__(self, store: Path, wait: bool = False) -> None:
        self.path = store / LOCK_NAME
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        if not _lock(self.fd, wait):
            holder = self.holder()
            os.close(self.fd)
            raise IndexBusy(
                f"{store} is being written by {holder}; send pages to that process "
                "(a running `neardup serve` takes POST /pages), wait for it (--wait), "
                "or open the index read-only"
            )
        os.ftruncate(self.fd, 0)
        os.lseek(self.fd, 0, os.SEEK_SET)
        os.write(self.fd, json.dumps({"pid": os.getpid(), "command": _command()}).encode())

    def holder(self) -> str:
        """The holder as `PID n (command)`, from the lock file."""
        try:
            raw = json.loads(self.path.read_text(encoding="utf-8") or "{}")
            return f"PID {raw['pid']} ({raw['command']})"
        except (OSError, ValueError, KeyError):
            return "another process"

    def release(self) -> None:
        if self.fd >= 0:
            os.ftruncate(self.fd, 0)
            _unlock(self.fd)
            os.close(self.fd)
            self.fd = -1


_WIN_LOCK_AT = 1 << 20  # the byte Windows locks: past any holder text, which stays readable


def _lock(fd: int, wait: bool) -> bool:
    """Take the exclusive lock on `fd`; False when another process holds it and not `wait`."""
    if sys.platform == "win32":
        import msvcrt

        while True:
            os.lseek(fd, _WIN_LOCK_AT, os.SEEK_SET)
            try:
                msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
                return True
            except OSError:
                if not wait:
                    return False
                time.sleep(0.2)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BlockingIOError:
        return False
    return True


def _unlock(fd: int) -> None:
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WIN_LOCK_AT, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)


def _command() -> str:
    try:
        raw = Path(f"/proc/{os.getpid()}/cmdline").read_bytes()
        words = [w.decode("utf-8", "replace") for w in raw.split(b"\0") if w]
    except OSError:
        words = list(sys.argv)
    return " ".join(words)[:300]
