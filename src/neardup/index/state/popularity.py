"""In-link popularity of would-be winners, with the in-links that arrive through redirects.

A link to a URL that redirects (directly or through a chain) to page P is, for a reader,
a link to P: the redirect's source and its target are one document. So the popularity used
by the winner rule is P's own in-links plus those of every page whose redirect chain ends
at P. Without this, the winner of a group could be a page that most of the web reaches
only through another member's old URL.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping


class RedirectGraph:
    """Reverse redirect edges (target -> sources), kept in step with the pages' redirects."""

    def __init__(self) -> None:
        self.sources: dict[str, set[str]] = {}

    def set(self, url: str, old: str | None, new: str | None) -> None:
        """`url` stopped redirecting to `old` and now redirects to `new` (either may be None)."""
        if old is not None and old in self.sources:
            self.sources[old].discard(url)
            if not self.sources[old]:
                del self.sources[old]
        if new is not None:
            self.sources.setdefault(new, set()).add(url)

    def upstream(self, url: str) -> list[str]:
        """Every page whose redirect chain passes through `url` (cycles visited once)."""
        seen = {url}
        stack = [url]
        out: list[str] = []
        while stack:
            for src in self.sources.get(stack.pop(), ()):
                if src not in seen:
                    seen.add(src)
                    out.append(src)
                    stack.append(src)
        return out

    def popularity(self, url: str, links_in: Callable[[str], int]) -> int:
        """Own in-links plus the in-links of all pages redirecting to `url`."""
        return links_in(url) + sum(links_in(u) for u in self.upstream(url))


def effective_popularity(
    links_in: Mapping[str, int], redirect_to: Mapping[str, str], urls: list[str]
) -> list[int]:
    """`RedirectGraph.popularity` of `urls` from plain mappings (for batch recomputation)."""
    graph = RedirectGraph()
    for src, dst in redirect_to.items():
        graph.set(src, None, dst)
    return [graph.popularity(u, lambda x: links_in.get(x, 0)) for u in urls]
