"""The parameters kernels read, as structural types, so kernels never import `neardup.config`.

Kernels sit below the configuration layer (see docs/architecture.md), yet they are called with
a `neardup.config.Settings`. These protocols list exactly the attributes each family of
kernels reads; `Settings` has them all and satisfies the protocols without naming them, so
callers keep passing their `Settings`. Members are read-only properties because `Settings` is
frozen. `Shingling` is the small value a kernel builds when it is given the shingle parameters
one by one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class ShingleParams(Protocol):
    """What shingling reads: w-word shingles, wrapped or not, seeded."""

    @property
    def seed(self) -> int: ...
    @property
    def shingle_size(self) -> int: ...
    @property
    def wrap_shingles(self) -> bool: ...


class SketchParams(ShingleParams, Protocol):
    """What sketching and the common-shingle filter read, on top of shingling."""

    @property
    def num_perm(self) -> int: ...
    @property
    def sketch(self) -> str: ...
    @property
    def max_shingle_df(self) -> int: ...
    @property
    def supershingle_count(self) -> int: ...
    @property
    def supershingle_size(self) -> int: ...
    @property
    def has_supershingles(self) -> bool: ...


class ChunkParams(Protocol):
    """What chunk fingerprinting reads: the chunking and the seed."""

    @property
    def seed(self) -> int: ...
    @property
    def chunking(self) -> str: ...


@dataclass(frozen=True)
class Shingling:
    """Shingle parameters as a value (a `ShingleParams`), for kernels given them one by one."""

    shingle_size: int
    wrap_shingles: bool
    seed: int
