"""Drop stale numba cache files of this package before any kernel is loaded.

numba's on-disk cache (`cache=True`) is invalidated when the file that *defines* a kernel
changes, but not when a kernel it calls, defined in another module, changes: the caller's
cache then keeps the old callee's machine code and silently computes old results. The
kernels here call across modules (the batch kernel inlines the token, shingle, min-hash and
filter kernels), so after any edit of a module of this package every cache entry older than
the newest source file is removed, and the kernels recompile once. Installed packages are
unaffected (their files do not change); this matters for editable checkouts.
"""

from __future__ import annotations

from pathlib import Path

_SUFFIXES = (".nbi", ".nbc")


def drop_stale_kernels(package_dir: Path) -> int:
    """Remove numba index/data files in `package_dir/__pycache__` older than the newest
    .py file of the package; returns how many were removed."""
    try:
        newest = max(p.stat().st_mtime for p in package_dir.glob("*.py"))
        cache = package_dir / "__pycache__"
        if not cache.is_dir():
            return 0
        removed = 0
        for entry in cache.iterdir():
            if entry.suffix in _SUFFIXES and entry.stat().st_mtime < newest:
                entry.unlink(missing_ok=True)
                removed += 1
        return removed
    except OSError:  # read-only install, concurrent removal: numba copes with what is left
        return 0
