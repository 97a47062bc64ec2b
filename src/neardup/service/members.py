"""Sets of pages by key, for keys that nearly always hold one page.

Why: the index keeps the pages of each shingle-set class (`scangraph.ScanGraph.classes`) and
of each group (`ServiceIndex.groups`), and nearly every class and group holds one page. A
Python set per key cost about 200 bytes a page; here a key of one page holds the bare URL and
becomes a set only from its second page on.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator
from typing import Generic, TypeVar

K = TypeVar("K")


class SmallSets(Generic[K]):
    """key -> pages (URLs); a key whose last page goes is dropped. What `get`, `[]`,
    `values` and `items` return is a read-only view: change it through `add`, `discard`
    and assignment."""

    def __init__(self) -> None:
        self._of: dict[K, str | set[str]] = {}

    def __len__(self) -> int:
        return len(self._of)

    def __contains__(self, key: object) -> bool:
        return key in self._of

    def __getitem__(self, key: K) -> Collection[str]:
        return _view(self._of[key])

    def __setitem__(self, key: K, pages: Iterable[str]) -> None:
        got = set(pages)
        if not got:
            self._of.pop(key, None)
        else:
            self._of[key] = next(iter(got)) if len(got) == 1 else got

    def get(self, key: K) -> Collection[str] | None:
        cur = self._of.get(key)
        return None if cur is None else _view(cur)

    def pop(self, key: K, default: Collection[str] | None = None) -> Collection[str] | None:
        cur = self._of.pop(key, None)
        return default if cur is None else _view(cur)

    def keys(self) -> Iterator[K]:
        return iter(self._of)

    def values(self) -> Iterator[Collection[str]]:
        return (_view(v) for v in self._of.values())

    def items(self) -> Iterator[tuple[K, Collection[str]]]:
        return ((k, _view(v)) for k, v in self._of.items())

    def add(self, key: K, url: str) -> None:
        cur = self._of.get(key)
        if cur is None:
            self._of[key] = url
        elif isinstance(cur, str):
            if cur != url:
                self._of[key] = {cur, url}
        else:
            cur.add(url)

    def discard(self, key: K, url: str) -> None:
        cur = self._of.get(key)
        if isinstance(cur, str):
            if cur == url:
                del self._of[key]
        elif cur is not None:
            cur.discard(url)
            if len(cur) == 1:
                self._of[key] = next(iter(cur))
            elif not cur:
                del self._of[key]

    def members(self, key: K) -> Collection[str]:
        """The key's pages (empty for an unknown key)."""
        cur = self._of.get(key)
        return () if cur is None else _view(cur)

    def size(self, key: K) -> int:
        cur = self._of.get(key)
        return 0 if cur is None else 1 if isinstance(cur, str) else len(cur)


def _view(cur: str | set[str]) -> Collection[str]:
    return (cur,) if isinstance(cur, str) else frozenset(cur)
