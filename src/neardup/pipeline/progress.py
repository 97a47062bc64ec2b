"""A tiny progress protocol, so the library reports progress without knowing the terminal."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    def stage(self, name: str, total: int | None = None) -> None:
        """A new stage begins; `total` units are expected when known."""

    def advance(self, units: int) -> None:
        """`units` more units of the current stage are done."""

    def done(self) -> None:
        """The current stage is finished."""


class SilentProgress:
    """The default for library calls: report nothing."""

    def stage(self, name: str, total: int | None = None) -> None:
        pass

    def advance(self, units: int) -> None:
        pass

    def done(self) -> None:
        pass
