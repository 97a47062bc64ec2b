"""Kernels that start numba only when a call needs it.

Every hot loop of neardup is a numba kernel. Importing numba and setting up its CPU target
as the first cached kernel loads cost 0.5-0.8 CPU-s in every process that runs one, which
was most of a one-record scan. So a kernel is defined with `njit` from this module, as with
numba's, but the decorator only records the function. A call runs it from the module
compiled ahead of time from this same source (`kernels/ahead.py`, built by `neardup
precompile`, which `scripts/setup.sh` runs) while the process has not started numba, where
the module holds the call's argument types and, for a kernel marked `nogil`, the call's
arrays hold at most `AHEAD_MAX_BYTES`. Any other call starts the JIT for the rest of the
process (`start`): every recorded kernel becomes a numba dispatcher, in place of the record
in every module that holds it, so kernels that call kernels compile (and inline) as before.

The size limit keeps the large calls of the kernels marked `nogil`, which threads run side
by side (the bucket pass, the service's sketching), on the JIT: the module compiled ahead
holds the interpreter lock. A kernel that holds the lock anyway, or any kernel in a process
that runs its kernels on one thread (`one_thread`: a worker of the local engine), runs
ahead at any size. Both compile the same source with the same numba for this processor, so
their results are the same bit for bit (the tests compare them). `NEARDUP_KERNELS=jit` in
the environment starts the JIT on the first call.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from neardup.kernels import ahead

AHEAD_MAX_BYTES = 1 << 20
MODE_ENV = "NEARDUP_KERNELS"

# what a caller may ask of a kernel as of a numba dispatcher (reading one starts the JIT)
_DISPATCHER_ATTRS = frozenset(
    {"signatures", "overloads", "nopython_signatures", "targetoptions", "stats", "compile"}
    | {"inspect_types", "inspect_llvm", "inspect_asm", "get_compile_result", "recompile"}
)
_kernels: list[Kernel] = []
_intrinsics: list[Intrinsic] = []
_lock = threading.Lock()
_started = False
_max_bytes: int | None = AHEAD_MAX_BYTES


class Kernel:
    """A function compiled by numba on the first call that needs the JIT, and run compiled
    ahead of time before that. `py_func` is the function; a dispatcher's attributes
    (`signatures`, `overloads`, `inspect_types`, ...) are its dispatcher's, and reading one
    starts the JIT."""

    def __init__(self, fn: Callable[..., Any], options: dict[str, Any]) -> None:
        self.py_func = fn
        self.work: int | None = options.get("work")
        self.options = {k: v for k, v in options.items() if k != "work"}  # numba's own
        self.side_by_side = bool(options.get("nogil"))  # threads may run it in parallel
        self.name = f"{fn.__module__}.{fn.__qualname__}"
        self.dispatcher: Any = None
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__wrapped__ = fn

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if not _started:
            if not kwargs:  # the exports take their arguments by position
                limit = _max_bytes if self.side_by_side else None
                compiled = ahead.lookup(self.name, args, self.work, limit)
                if compiled is not None:
                    return compiled(*args)
            start()
        return self.dispatcher(*args, **kwargs)

    def __getattr__(self, attr: str) -> Any:
        if attr not in _DISPATCHER_ATTRS:  # no JIT started by a library's probing getattr
            raise AttributeError(attr)
        start()
        return getattr(self.dispatcher, attr)

    def __repr__(self) -> str:
        return f"<neardup kernel {self.name}>"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled by name (a task sent to a worker or a Spark executor): the other
        process takes its own module's kernel, recorded or made."""
        return (_named, (self.py_func.__module__, self.py_func.__qualname__))


def _named(module: str, qualname: str) -> Any:
    return getattr(importlib.import_module(module), qualname)


class Intrinsic:
    """A numba intrinsic (LLVM IR for one operation), made when the JIT starts; only
    kernels call it. Its function imports what it needs from numba and llvmlite itself."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.py_func = fn
        self.compiled: Any = None
        self.__doc__ = fn.__doc__
        self.__name__ = fn.__name__

    def __call__(self, *args: Any) -> Any:
        raise TypeError(f"{self.__name__} is an intrinsic: only a kernel can call it")


def njit(*args: Any, **options: Any) -> Any:
    """numba's `njit` (`@njit` or `@njit(cache=True, ...)`), recorded until the JIT starts;
    a numba dispatcher itself once it has. `work=I` (this module's own option) says that
    the I-th argument alone measures a call's work against `AHEAD_MAX_BYTES`, where the
    others include tables of a fixed size (the tokenizer's, 4.4 MB); by default every
    array argument counts."""

    def wrap(fn: Callable[..., Any]) -> Any:
        with _lock:
            kernel = Kernel(fn, options)
            _kernels.append(kernel)
            if not _started:
                return kernel
            import numba

            kernel.dispatcher = numba.njit(**kernel.options)(fn)
            return kernel.dispatcher

    if args and callable(args[0]) and len(args) == 1 and not options:
        return wrap(args[0])
    if args:
        raise TypeError("neardup's njit takes options by keyword only")
    return wrap


def intrinsic(fn: Callable[..., Any]) -> Any:
    """numba's `@intrinsic`, made when the JIT starts."""
    with _lock:
        if _started:
            from numba.extending import intrinsic as numba_intrinsic

            return numba_intrinsic(fn)
        made = Intrinsic(fn)
        _intrinsics.append(made)
        return made


def one_thread() -> None:
    """This process runs its kernels on one thread (a worker of the local engine): every
    call with types compiled ahead runs ahead, whatever its size. The limit is for threads
    side by side; on one, the module compiled ahead is as fast as the JIT or faster (a
    sketch of 20 MB of text took 0.13 against 0.17 CPU-s), and a worker that never starts
    the JIT saves its start."""
    global _max_bytes
    _max_bytes = None


def started() -> bool:
    """Whether this process runs its kernels on numba's JIT."""
    return _started


def kernels() -> list[Kernel]:
    """Every kernel defined in this process, in the order they were defined."""
    return list(_kernels)


def start() -> None:
    """Start numba's JIT for the rest of the process: every kernel and intrinsic recorded so
    far is made, and put in place of its record in every module of neardup that holds it
    (the names kernels call each other by)."""
    global _started
    if _started:
        return
    with _lock:
        if _started:
            return
        import numba
        from numba.extending import intrinsic as numba_intrinsic

        for made in _intrinsics:
            made.compiled = numba_intrinsic(made.py_func)
        for kernel in _kernels:
            kernel.dispatcher = numba.njit(**kernel.options)(kernel.py_func)
        _put_in_place()
        _started = True


def _put_in_place() -> None:
    """Replace every record in the namespaces of neardup's modules by what it made."""
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "neardup" or name.startswith("neardup.")):
            continue
        space = vars(module)
        for key, value in list(space.items()):
            if isinstance(value, Kernel):
                space[key] = value.dispatcher
            elif isinstance(value, Intrinsic):
                space[key] = value.compiled


if os.environ.get(MODE_ENV) == "jit":
    ahead.refuse()
