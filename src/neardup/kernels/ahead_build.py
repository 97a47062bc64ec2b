"""Build the kernels compiled ahead of time (`kernels/ahead.py`); `neardup precompile`
(run by `scripts/setup.sh`) gives it the commands to learn the types from.

Which kernels, at which argument types: those that a probe (small commands: a scan, its
reports, an add) calls, run on the JIT in this process, read from every kernel's compiled
signatures. A call with types not among them starts the JIT, so a missing signature costs
time, never a result. Each signature is exported under a name of its own with numba's
`pycc`, compiled for this processor as the JIT compiles (a module found on another is not
used: `ahead.stamp`). The module is written under a name of its own build, then its
manifest is put in place by a rename, so a process never loads half a build or another
build's exports under the names its manifest gave.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from neardup.kernels import ahead, jit


def type_key(ty: Any) -> str | None:
    """A numba type spelled as `ahead.value_key` spells a value of it, or None for a type
    an export cannot take or give."""
    from numba.core import types

    if isinstance(ty, types.Array):
        mark = ("" if ty.mutable else "r") + ("" if ty.aligned else "u")
        return f"{ty.dtype}[{ty.ndim}{ty.layout}{mark}]"
    if isinstance(ty, types.Boolean):
        return "bool"
    if isinstance(ty, (types.Integer, types.Float)):
        return str(ty)
    if isinstance(ty, types.NoneType):
        return "none"
    if isinstance(ty, types.BaseTuple):
        inner = [type_key(t) for t in ty.types]
        if any(k is None for k in inner):
            return None
        return "(" + ",".join(k for k in inner if k is not None) + ")"
    return None


def build(
    folder: Path, work: Path, probe: Callable[[Path], None], say: Callable[[str], None]
) -> int:
    """Run `probe` (given a scratch folder) on the JIT, then compile every kernel at the
    types it was called with into `folder`; returns how many exports were written."""
    from numba.pycc import CC

    jit.start()
    started = time.perf_counter()
    probe(work)
    say(f"probed the kernels' types in {time.perf_counter() - started:.1f} s")
    cc = CC(ahead.MODULE)
    cc.output_dir = str(work / "out")
    cc.target_cpu = "host"  # as the JIT compiles; the stamp names the processor
    exports: list[dict[str, str]] = []
    defined_in: set[str] = set()
    root = ahead.package_root()
    for kernel in jit.kernels():
        for compiled in kernel.dispatcher.overloads.values():
            sig = compiled.signature
            keys = [type_key(t) for t in sig.args]
            if type_key(sig.return_type) is None or any(k is None for k in keys):
                continue
            name = f"k{len(exports)}"
            cc.export(name, sig)(kernel.py_func)
            exports.append({"kernel": kernel.name, "key": ",".join(keys), "export": name})  # type: ignore[arg-type]
            source = Path(kernel.py_func.__code__.co_filename).resolve()
            defined_in.add(source.relative_to(root.resolve()).as_posix())
    started = time.perf_counter()
    cc.compile()
    say(f"compiled {len(exports)} exports in {time.perf_counter() - started:.1f} s")
    built = next((work / "out").glob(f"{ahead.MODULE}*{_suffix()}"))
    sources = ahead.kernel_sources(defined_in)
    # A file of this build's own: a process that read the manifest before it was replaced
    # loads the file that manifest names, or none (then the JIT), never another build's
    # exports under its names.
    name = f"{ahead.MODULE}-{time.time_ns():x}-{os.getpid()}{_suffix()}"
    manifest = {
        "file": name,
        "stamp": ahead.stamp(sources),
        "sources": sources,
        "exports": exports,
    }
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(built, folder / f".{name}.tmp")
    os.replace(folder / f".{name}.tmp", folder / name)
    pending = folder / f".{ahead.MANIFEST}.{os.getpid()}.tmp"
    pending.write_text(json.dumps(manifest, indent=1) + "\n")
    os.replace(pending, folder / ahead.MANIFEST)
    for old in folder.glob(f"{ahead.MODULE}*{_suffix()}"):  # earlier builds' files
        if old.name != name:
            old.unlink(missing_ok=True)
    return len(exports)


def _suffix() -> str:
    import importlib.machinery

    return importlib.machinery.EXTENSION_SUFFIXES[0]
