"""What a command's processes load as they start: not the modules that neardup's libraries
import only to see whether they are installed, and one BLAS thread (`one_blas_thread`).

pyarrow imports pandas (where installed; the `spark` extra installs it) the first time it
reads a file or makes an array, and numba imports scipy to look for a BLAS that none of
neardup's kernels calls: 0.2-0.33 s and 0.1 s of every process that starts (`python -X
importtime`), about a third of a small `neardup add`, `neardup scan` or `neardup mirrors`.
No command on the embedded engine uses either (`supershingle_probability`, the one function
of neardup's that needs scipy, is for callers of the library). The console entry point
makes them missing for every command line that does not ask for `--engine spark`, and the
worker processes they start do the same (`in_worker`); on the Spark engine they stay, since
PySpark's Arrow exchange needs pandas.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Mapping
from typing import Any

PROBED_NOT_USED = ("pandas", "scipy")
# Set for the processes a command starts (the local engine's workers read it as they start).
WITHOUT_PROBED_ENV = "NEARDUP_WITHOUT_PROBED"


class _Absent:
    """An import finder that finds the modules of `PROBED_NOT_USED` missing (as if not
    installed). A finder, not None in `sys.modules`: compiled modules (pyarrow's) read
    `sys.modules` directly and would take the None for the module."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        if name.partition(".")[0] in PROBED_NOT_USED:
            raise ModuleNotFoundError(f"no module named {name!r} in this command", name=name)


def without_probed_modules() -> None:
    """Make the probes of `PROBED_NOT_USED` find their modules missing, in this process and
    in the workers it starts, so they go on without them. Only where nothing imported them
    yet; nothing the command runs may need them (its tests run the commands)."""
    if any(m.partition(".")[0] in PROBED_NOT_USED for m in sys.modules):
        return
    if not any(isinstance(f, _Absent) for f in sys.meta_path):
        sys.meta_path.insert(0, _Absent())
    os.environ[WITHOUT_PROBED_ENV] = "1"


# numpy's OpenBLAS reads this as numpy loads (the wheels' scipy-openblas among them).
BLAS_THREADS_ENV = "OPENBLAS_NUM_THREADS"


def one_blas_thread() -> None:
    """Ask numpy's OpenBLAS for one thread, before numpy loads.

    OpenBLAS starts a thread for each core as numpy is imported, and they spin while they
    wait for work: half of `import numpy`'s CPU on a two-core machine (0.26 against 0.13
    CPU-s, user + system), in a command's process and again in each of its workers (which
    inherit the environment). No neardup command calls BLAS (no matrix products; the kernels
    are numba's), so the console entry point sets it for every command. A user's own
    setting stays; where numpy is already loaded the setting would come too late and is not
    made."""
    if "numpy" not in sys.modules:
        os.environ.setdefault(BLAS_THREADS_ENV, "1")


def in_worker() -> None:
    """A worker process's start: without the probed modules when its command is."""
    if os.environ.get(WITHOUT_PROBED_ENV):
        without_probed_modules()


def loaded_on_first_use(package: str, homes: Mapping[str, str]) -> Callable[[str], Any]:
    """A package's module `__getattr__` (PEP 562) that takes each name of `homes` from its
    module, `package.homes[name]`, when the name is first used: a package whose modules
    are imported alone then does not load what its other modules need (DuckDB for
    `neardup.store`, the index for `neardup.service`)."""

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{home}"), name)

    return __getattr__
