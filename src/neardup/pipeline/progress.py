"""A tiny progress protocol, so the library reports progress without knowing the terminal."""

from __future__ import annotations

from typing import Literal, Protocol

# What a stage counts: items (pages, records) or bytes of input, which a display shows as
# sizes. Reading counts bytes because the input's size is known before a record is read,
# where its number of records is not: bytes give the bar a total and an ETA.
Unit = Literal["items", "bytes"]


class Progress(Protocol):
    # Whether anyone sees the progress: a total that costs requests (the sizes of URLs) is
    # only worked out when so.
    shown: bool

    def stage(self, name: str, total: int | None = None, unit: Unit = "items") -> None:
        """A new stage begins; `total` units are expected when known."""

    def advance(self, units: int) -> None:
        """`units` more units of the current stage are done."""

    def done(self) -> None:
        """The current stage is finished."""


class SilentProgress:
    """The default for library calls: report nothing."""

    shown = False

    def stage(self, name: str, total: int | None = None, unit: Unit = "items") -> None:
        pass

    def advance(self, units: int) -> None:
        pass

    def done(self) -> None:
        pass
