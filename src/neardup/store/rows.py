"""Rows of a run's `.npy` matrices (signatures, super-shingles), read without keeping them
resident: used by the scan's later stages and by the store build."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

# Scattered rows read through one memory map (`MappedRows`): at most this many 4 KiB pages
# of the file are resident at once (32 MiB).
GATHER_ROWS = 8_192


class MappedRows:
    """The rows of a `.npy` matrix, each read through a memory map opened for that read only.

    A map kept open for a whole stage holds every page it has touched in the process's
    resident memory (a full pass over a crawl's signatures adds 512 bytes per page at
    K = 128); mapping the file per read keeps only the rows asked for. Indexing returns a
    copy in memory, as `np.asarray(memmap[index])` would."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        probe = np.load(self.path, mmap_mode="r")
        self.shape: tuple[int, ...] = probe.shape
        self.dtype = probe.dtype
        del probe

    def __len__(self) -> int:
        return self.shape[0]

    def __getitem__(self, index: Any) -> np.ndarray:
        if self.shape[0] == 0 or (len(self.shape) > 1 and self.shape[1] == 0):
            return np.empty((0, *self.shape[1:]), dtype=self.dtype)[index]
        if isinstance(index, np.ndarray) and index.ndim == 1 and index.size > GATHER_ROWS:
            # Rows scattered over the file touch one 4 KiB page each while mapped: gather
            # them a block at a time, each through its own map, so that at most GATHER_ROWS
            # pages are resident at once.
            out = np.empty((index.size, *self.shape[1:]), dtype=self.dtype)
            for start in range(0, index.size, GATHER_ROWS):
                out[start : start + GATHER_ROWS] = self[index[start : start + GATHER_ROWS]]
            return out
        mapped = np.load(self.path, mmap_mode="r")
        try:
            return np.array(mapped[index])
        finally:
            del mapped
