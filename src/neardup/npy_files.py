"""The header of a `.npy` file: read, to find where its rows are, and written, for a file
whose rows are written afterwards by other means (copied by the kernel, written in place by
several writers, appended as they come). Below every layer and importing numpy alone: the
index's saves (`index/files/saves.py`) and the executors that write parts of them
(`band_save.py`), and the scan's signature matrices (`pipeline/steps/sketch.py`, the ingest's
workers in `ingest_ranges.py`) write their headers with it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def layout(path: Path) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """A saved `.npy` file's shape, whether it is in Fortran order, its dtype, and where its
    data starts, from its header (either version of the format)."""
    with open(path, "rb") as fh:
        version = np.lib.format.read_magic(fh)
        read = (
            np.lib.format.read_array_header_1_0
            if version == (1, 0)
            else np.lib.format.read_array_header_2_0
        )
        shape, fortran, dtype = read(fh)
        return tuple(shape), bool(fortran), np.dtype(dtype), fh.tell()


def header(path: Path) -> tuple[int, int]:
    """The rows of a saved `.npy` matrix and where its data starts, from its header."""
    shape, _, _, start = layout(path)
    return int(shape[0]), start


def data_start(path: Path) -> int:
    """Where a saved `.npy` file's data starts (after its header): where a writer of part of
    a file counts its offsets from."""
    return header(path)[1]


def write_header(fh: Any, dtype: Any, shape: tuple[int, ...]) -> int:
    """A C-order `.npy` header for an array of `shape`; returns where its data starts."""
    fields = {
        "descr": np.lib.format.dtype_to_descr(np.dtype(dtype)),
        "fortran_order": False,
        "shape": tuple(shape),
    }
    np.lib.format.write_array_header_1_0(fh, fields)
    return int(fh.tell())
