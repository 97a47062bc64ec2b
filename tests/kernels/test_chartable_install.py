"""A character table handed to the kernels is the one they use, and a malformed one is refused."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

from neardup.kernels import canonicalize
from neardup.kernels import chartable as ct


@pytest.fixture
def restored() -> Iterator[ct.Table]:
    """This process's table, put back after the test whatever the test installed."""
    table = ct.char_table()
    yield table
    ct.install_char_table(table)


def test_installed_table_is_the_one_the_kernels_read(restored: ct.Table) -> None:
    before = canonicalize("café au lait")
    codes = restored.codes.copy()
    codes[ord("é")] = ord("x")  # a table that differs where a text can show it
    ct.install_char_table(ct.Table(codes, restored.expansions.copy(), restored.max_out))
    assert ct.has_char_table()
    assert canonicalize("café au lait") == "cafx au lait"
    ct.install_char_table(restored)
    assert canonicalize("café au lait") == before


def test_installed_arrays_are_read_only(restored: ct.Table) -> None:
    table = ct.Table(restored.codes.copy(), restored.expansions.copy(), restored.max_out)
    ct.install_char_table(table)
    assert not ct.char_table().codes.flags.writeable
    assert not ct.char_table().expansions.flags.writeable


@pytest.mark.parametrize(
    "codes, expansions, max_out",
    [
        (np.zeros(10, dtype=np.int32), np.zeros(1, dtype=np.int32), 8),  # too short
        (np.zeros(0x110000, dtype=np.int64), np.zeros(1, dtype=np.int32), 8),  # wrong type
        (np.zeros(0x110000, dtype=np.int32), np.zeros(0, dtype=np.int32), 8),  # no expansions
        (np.zeros(0x110000, dtype=np.int32), np.zeros(1, dtype=np.int32), 2),  # max_out too small
    ],
)
def test_malformed_tables_are_refused(
    restored: ct.Table, codes: np.ndarray, expansions: np.ndarray, max_out: int
) -> None:
    with pytest.raises(ValueError, match="character table"):
        ct.install_char_table(ct.Table(codes, expansions, max_out))
    assert ct.char_table() is restored  # a refused table leaves the old one in place


def test_built_table_equals_the_process_table(restored: ct.Table) -> None:
    fresh = ct.build_char_table()
    assert np.array_equal(fresh.codes, restored.codes)
    assert np.array_equal(fresh.expansions, restored.expansions)
    assert fresh.max_out == restored.max_out
