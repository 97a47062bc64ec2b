"""The one folder neardup keeps its caches in (the tokenizer's table, the UI's word indexes,
the kernels compiled ahead where the package cannot be written). Below every layer, importing
nothing of neardup's, so the kernels find it as the pipeline and the UI do."""

from __future__ import annotations

import os
import sys
from pathlib import Path

CACHE_ENV = "NEARDUP_CACHE_DIR"  # overrides the folder, e.g. for a read-only home


def cache_dir() -> Path | None:
    """The folder neardup keeps caches in: `$NEARDUP_CACHE_DIR`, else the platform's user
    cache folder (XDG on Linux). None when there is no home to put it in."""
    override = os.environ.get(CACHE_ENV)
    if override:
        return Path(override)
    try:
        home = Path.home()
    except (RuntimeError, KeyError):  # no HOME and no passwd entry
        return None
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local")
        return base / "neardup" / "Cache"
    if sys.platform == "darwin":
        return home / "Library" / "Caches" / "neardup"
    return Path(os.environ.get("XDG_CACHE_HOME") or home / ".cache") / "neardup"
