"""The kernels compiled ahead of time: found, checked against their source, looked up by the
types of a call's arguments. No numba here: a process that runs only these never imports it.

`neardup precompile` (run by `scripts/setup.sh`; `ahead_build.py`) compiles, with numba's
`pycc`, every kernel at the argument types that small scans and adds call it with, into an
extension module beside this file (or, where the package cannot be written, in neardup's
cache folder), with a manifest: which export is which kernel at which types, and a stamp of what it
was compiled from (Python and numpy versions, the processor, the kernels' source files). A module
whose stamp differs from the source now is not used: after an edit of a kernel, or an
upgrade, the kernels run on the JIT until the module is built again.

The types are matched exactly, as numba types a call (`numba.typeof`): the export was
compiled for one dtype, dimension count, memory layout and writability of each array, and
is given nothing else (its wrapper would not check).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numpy as np

from neardup.cache_folder import cache_dir

MODULE = "_ahead"
MANIFEST = "_ahead.json"
HERE = Path(__file__).parent

_table: dict[tuple[str, str], Callable[..., Any]] | None = None
_loading = threading.Lock()


def folders() -> list[Path]:
    """Where the module is looked for, first found first: beside this file, then the
    `kernels` folder of neardup's cache (`cache_folder.cache_dir`), where there is one."""
    cache = cache_dir()
    return [HERE] if cache is None else [HERE, cache / "kernels"]


def build_folder() -> Path:
    """Where a build goes: beside this file where the package can be written, else the
    cache's folder (the last of `folders`)."""
    return HERE if os.access(HERE, os.W_OK) else folders()[-1]


def package_root() -> Path:
    """The folder of the `neardup` package, which the manifest's source paths are under."""
    return HERE.parent


def stamp(sources: Iterable[str]) -> str:
    """What a module compiled from `sources` (paths under the package) must match: the
    Python and numpy it was built against, the processor, and every source file's bytes.
    (Not numba's version: reading it costs a tenth of what the module saves, and the module
    is machine code that no longer depends on numba.)"""
    digest = hashlib.sha256()
    for part in (sys.version, np.__version__, host_cpu()):
        digest.update(part.encode() + b"\0")
    root = package_root()
    for rel in sorted(set(sources)):
        digest.update(rel.encode() + b"\0")
        try:
            digest.update((root / rel).read_bytes())
        except OSError:
            digest.update(b"\0missing")
    return digest.hexdigest()


def host_cpu() -> str:
    """This machine's processor and its features, as Linux names them (`/proc/cpuinfo`):
    the module is compiled for the processor it is built on, as the JIT compiles, and is not
    used on another (a copy of the package on another machine)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            seen = {}
            for line in info:
                key, _, value = line.partition(":")
                key = key.strip()
                if key in ("model name", "flags", "Features", "CPU part") and key not in seen:
                    seen[key] = value.strip()
                if not line.strip() and seen:
                    break
        return repr(sorted(seen.items()))
    except OSError:
        import platform

        return f"{platform.machine()} {platform.processor()}"


# The files that load and build the module: nothing of them is compiled into it, so an edit
# of them leaves every module built before in use.
_NOT_COMPILED = frozenset({"ahead.py", "ahead_build.py"})


def kernel_sources(defined_in: Iterable[str]) -> list[str]:
    """The files a module compiled ahead depends on: every file of the kernels package (its
    constants are compiled in) but the loader and the builder, and the files that define
    kernels elsewhere."""
    root = package_root()
    own = [p.relative_to(root).as_posix() for p in HERE.glob("*.py") if p.name not in _NOT_COMPILED]
    return sorted({*own, *defined_in})


def refuse() -> None:
    """Never use a module compiled ahead in this process (`NEARDUP_KERNELS=jit`)."""
    global _table
    _table = {}


def _load() -> dict[tuple[str, str], Callable[..., Any]]:
    for folder in folders():
        try:
            manifest = json.loads((folder / MANIFEST).read_text())
            if manifest["stamp"] != stamp(manifest["sources"]):
                continue
            spec = importlib.util.spec_from_file_location(
                f"neardup.kernels.{MODULE}", folder / manifest["file"]
            )
            if spec is None or spec.loader is None:
                continue
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return {
                (e["kernel"], e["key"]): getattr(module, e["export"]) for e in manifest["exports"]
            }
        except (OSError, ValueError, KeyError, TypeError, ImportError, AttributeError):
            continue
    return {}


def loaded() -> dict[tuple[str, str], Callable[..., Any]]:
    """The exports of the module found for this source, by (kernel, types); empty where
    none is current."""
    global _table
    if _table is None:
        with _loading:
            if _table is None:
                _table = _load()
    return _table


def lookup(
    kernel: str, args: tuple[Any, ...], work: int | None, max_bytes: int | None
) -> Callable[..., Any] | None:
    """The export of `kernel` compiled for the types of `args`, if there is one and the
    call's arrays (the `work`-th argument alone, where given) hold at most `max_bytes`
    (None: any size)."""
    table = loaded()
    if not table:
        return None
    if max_bytes is not None:
        measured = args if work is None else args[work : work + 1]
        if sum(a.nbytes for a in measured if isinstance(a, np.ndarray)) > max_bytes:
            return None
    keys = [value_key(arg) for arg in args]
    if any(key is None for key in keys):
        return None
    return table.get((kernel, ",".join(k for k in keys if k is not None)))


def value_key(value: Any) -> str | None:
    """The name of the numba type of `value` (what `numba.typeof` would give, spelled as
    `ahead_build.type_key` spells a numba type), or None for a type no export takes."""
    if isinstance(value, np.ndarray):
        if not value.dtype.isnative:
            return None
        flags = value.flags
        layout = "C" if flags.c_contiguous else "F" if flags.f_contiguous else "A"
        mark = "" if flags.writeable else "r"  # alignment: numba types it aligned, as here
        return f"{value.dtype.name}[{value.ndim}{layout}{mark}]"
    if isinstance(value, (bool, np.bool_)):
        return "bool"
    if isinstance(value, int):
        if -(1 << 63) <= value < 1 << 63:
            return "int64"
        return "uint64" if 0 <= value < 1 << 64 else None
    if isinstance(value, float):
        return "float64"
    if isinstance(value, (np.integer, np.floating)):
        return value.dtype.name
    if value is None:
        return "none"
    if isinstance(value, tuple):
        inner = [value_key(v) for v in value]
        if any(k is None for k in inner):
            return None
        return "(" + ",".join(k for k in inner if k is not None) + ")"
    return None
