"""Build the kernels compiled ahead of time (`kernels/ahead.py`); `neardup precompile`
(run by `scripts/setup.sh`) gives it the commands to learn the types from, and a display of
its progress: the probe and the compile take a minute or two on a slow machine, which a
person should not sit through without a sign of life.

Which kernels, at which argument types: those that a probe (small commands: a scan, its
reports, an add) calls, run on the JIT in this process, read from every kernel's compiled
signatures. A call with types not among them starts the JIT, so a missing signature costs
time, never a result. The probe's findings are kept in the package (`ahead_types.json`,
written by `neardup precompile --probe`), and a build compiles from them without probing:
the probe JIT-compiles every kernel it calls (85 s of the two minutes a fresh build took
on a 2-core machine) only to learn types that change only when a kernel's callers do. Where
the kept types no longer compile (a kernel renamed, its arguments changed), the build
probes instead and says so. Each signature is exported under a name of its own with numba's
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
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Protocol

from neardup.kernels import ahead, jit

# One command of the probe: what a display calls it, and what runs it in a scratch folder.
ProbeStep = tuple[str, Callable[[Path], None]]


class Progress(Protocol):
    """What the build reports to (`cli/kernels.py` draws it): the command line's stage
    protocol (`pipeline/progress.py`, which this layer cannot import), and `note`, what the
    current stage does now (a probe command, an export)."""

    def stage(self, name: str, total: int | None = None) -> None:
        """A stage begins; `total` steps are expected where known."""

    def note(self, what: str) -> None:
        """The step the current stage is on."""

    def advance(self, units: int) -> None:
        """`units` more steps are done."""

    def done(self) -> None:
        """The current stage is finished."""


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


# The types the probe found, kept with the source (`write_types`); `build` compiles them.
TYPES = ahead.HERE / "ahead_types.json"

# An export to compile: a kernel, and numba's signature of the types it is compiled at.
Export = tuple[jit.Kernel, Any]


def build(
    folder: Path,
    work: Path,
    probe: Sequence[ProbeStep],
    say: Callable[[str], None],
    progress: Progress,
    types: Path | None = TYPES,
) -> int:
    """Compile every kernel at the types small commands call it with into `folder`; returns
    how many exports were written. The types are those kept in `types` where it is given
    and they compile; else (or where they do not) the steps of `probe` run, each given a
    scratch folder, on the JIT, and the types are read from what it compiled."""
    jit.start()
    if types is not None:
        try:
            exports = kept_exports(types)
        except (OSError, ValueError, KeyError, TypeError) as err:
            say(f"the kept kernel types ({types.name}) cannot be read ({err}): probing them")
        else:
            try:
                return compile_exports(folder, work, exports, say, progress)
            except Exception as err:  # numba's typing errors are many
                say(
                    f"the kept kernel types ({types.name}) no longer compile "
                    f"({type(err).__name__}): probing them; "
                    "`neardup precompile --probe` keeps the new ones"
                )
    return compile_exports(folder, work, probed_exports(probe, say, progress), say, progress)


def probed_exports(
    probe: Sequence[ProbeStep], say: Callable[[str], None], progress: Progress
) -> list[Export]:
    """Run `probe` on the JIT (its scratch folder made here) and read every kernel's
    compiled signatures; where numba's cache holds what a step calls, it is loaded rather
    than compiled."""
    import tempfile

    jit.start()
    started = time.perf_counter()
    progress.stage("probing the kernels' types", total=len(probe))
    with tempfile.TemporaryDirectory(prefix="neardup-probe-") as scratch:
        for label, step in probe:
            progress.note(label)
            step(Path(scratch))
            progress.advance(1)
    progress.done()
    say(f"probed the kernels' types in {time.perf_counter() - started:.1f} s")
    exports: list[Export] = []
    for kernel in jit.kernels():
        for compiled in kernel.dispatcher.overloads.values():
            sig = compiled.signature
            keys = [type_key(t) for t in sig.args]
            if type_key(sig.return_type) is None or any(k is None for k in keys):
                continue
            exports.append((kernel, sig))
    return exports


def kept_exports(path: Path) -> list[Export]:
    """The exports that `path` keeps (`write_types`), as numba signatures of this
    process's kernels; KeyError names a kernel no longer there."""
    import importlib

    entries = json.loads(path.read_text())["exports"]
    for entry in entries:  # a kernel of another layer (the service's) is defined on import
        importlib.import_module(entry["kernel"].rpartition(".")[0])
    by_name = {kernel.name: kernel for kernel in jit.kernels()}
    exports: list[Export] = []
    for entry in entries:
        args = [parse_key(key) for key in entry["args"]]
        exports.append((by_name[entry["kernel"]], parse_key(entry["returns"])(*args)))
    return exports


def write_types(path: Path, exports: Sequence[Export]) -> None:
    """Keep the types of `exports` in `path`, sorted so that a change reads as one line."""
    rows = sorted(
        (
            {
                "kernel": kernel.name,
                "args": [type_key(t) for t in sig.args],
                "returns": type_key(sig.return_type),
            }
            for kernel, sig in exports
        ),
        key=lambda row: json.dumps(row),
    )
    lines = ",\n".join("  " + json.dumps(row) for row in rows)
    path.write_text('{"exports": [\n' + lines + "\n]}\n")


def parse_key(key: str) -> Any:
    """The numba type that `type_key` spells `key`; ValueError where it spells none."""
    ty, rest = _parse(key.replace(" ", ""))
    if rest:
        raise ValueError(f"not a kernel type: {key!r}")
    return ty


def _parse(text: str) -> tuple[Any, str]:
    import numba
    import numpy as np
    from numba.core import types

    if text.startswith("("):
        inner: list[Any] = []
        text = text[1:]
        while not text.startswith(")"):
            item, text = _parse(text)
            inner.append(item)
            text = text[1:] if text.startswith(",") else text
            if not text:
                raise ValueError("a tuple not closed")
        return types.Tuple(inner), text[1:]
    name, _, rest = text.partition(",")
    name, bracket, array = name.partition("[")
    if bracket:
        spec, _, after = (array + ("," + rest if rest else "")).partition("]")
        layout = spec.rstrip("ru")
        dims, order = layout[:-1], layout[-1:]
        if not dims.isdigit() or order not in ("C", "F", "A"):
            raise ValueError(f"not an array type: {text!r}")
        dtype = numba.from_dtype(np.dtype(name))
        marks = spec[len(layout) :]
        ty = types.Array(dtype, int(dims), order, readonly="r" in marks, aligned="u" not in marks)
        return ty, after
    end = min((i for i in (text.find(","), text.find(")")) if i >= 0), default=len(text))
    name, rest = text[:end], text[end:]
    if name == "none":
        return types.none, rest
    if name == "bool":
        return types.boolean, rest
    try:
        return numba.from_dtype(np.dtype(name)), rest
    except TypeError as err:
        raise ValueError(f"not a kernel type: {name!r}") from err


def compile_exports(
    folder: Path,
    work: Path,
    exports: Sequence[Export],
    say: Callable[[str], None],
    progress: Progress,
) -> int:
    """Compile `exports` with `pycc` into a module of this build's own name in `folder`,
    then put its manifest in place."""
    from numba.pycc import CC

    cc = CC(ahead.MODULE)
    out = work / f"out-{time.time_ns():x}"
    cc.output_dir = str(out)
    cc.target_cpu = "host"  # as the JIT compiles; the stamp names the processor
    manifest_exports: list[dict[str, str]] = []
    defined_in: set[str] = set()
    root = ahead.package_root()
    for kernel, sig in exports:
        name = f"k{len(manifest_exports)}"
        cc.export(name, sig)(kernel.py_func)
        keys = ",".join(type_key(t) or "" for t in sig.args)
        manifest_exports.append({"kernel": kernel.name, "key": keys, "export": name})
        source = Path(kernel.py_func.__code__.co_filename).resolve()
        defined_in.add(source.relative_to(root.resolve()).as_posix())
    started = time.perf_counter()
    progress.stage("compiling the exports", total=len(exports) + 1)
    with _counting_exports(progress, len(exports)):
        cc.compile()
    progress.done()
    say(f"compiled {len(exports)} exports in {time.perf_counter() - started:.1f} s")
    built = next(out.glob(f"{ahead.MODULE}*{_suffix()}"))
    sources = ahead.kernel_sources(defined_in)
    # A file of this build's own: a process that read the manifest before it was replaced
    # loads the file that manifest names, or none (then the JIT), never another build's
    # exports under its names.
    name = f"{ahead.MODULE}-{time.time_ns():x}-{os.getpid()}{_suffix()}"
    manifest = {
        "file": name,
        "stamp": ahead.stamp(sources),
        "sources": sources,
        "exports": manifest_exports,
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


@contextmanager
def _counting_exports(progress: Progress, count: int) -> Iterator[None]:
    """Count the `count` exports as `pycc` types and lowers them, then the optimising and
    linking as one step more. `CC.compile` is one call with no hook of its own; its module
    calls `compile_extra` once per export, so that name is wrapped there for the length of
    the compile (and put back, whatever happens)."""
    from numba.pycc import compiler

    original = compiler.compile_extra
    lowered = 0

    def counted(*args: Any, **kwargs: Any) -> Any:
        nonlocal lowered
        function = args[2] if len(args) > 2 else kwargs.get("func")
        progress.note(getattr(function, "__name__", "an export"))
        result = original(*args, **kwargs)
        lowered += 1
        progress.advance(1)
        if lowered == count:
            progress.note("optimising the module and linking it")
        return result

    compiler.compile_extra = counted
    try:
        yield
        progress.advance(1)
    finally:
        compiler.compile_extra = original


def _suffix() -> str:
    import importlib.machinery

    return importlib.machinery.EXTENSION_SUFFIXES[0]
