"""The winner of a duplicate group, after Ask.com's incremental system (paper 004).

Which pages form a group is not decided here: groups are the scan's clusters
(`scangraph.ScanGraph`), so the service and `neardup scan` agree on the same pages. What the
service adds is the *winner*, the page a search engine shows for the group, chosen by a
total order on what a search engine knows of each page.
"""

from __future__ import annotations

from collections.abc import Sequence

from neardup.ingest.urls import host_of


def winner_key(url: str, links_in: int, suffixes: Sequence[str] = ()) -> tuple:
    """Sort key of a would-be winner, best first.

    In-link popularity first (the page users and other sites point to), then static over
    dynamic URLs (no '?': more stable, better for users), then the shorter URL, then the
    market's preferred domain suffix, then the URL itself so that the choice is total and
    the same in every process.
    """
    host = host_of(url) or ""
    rank = next((i for i, s in enumerate(suffixes) if host.endswith(s)), len(suffixes))
    return (-links_in, "?" in url, len(url), rank, url)


def elect(
    urls: Sequence[str], popularity: Sequence[int], suffixes: Sequence[str] = ()
) -> list[int]:
    """Positions of `urls`, best would-be winner first (`winner_key`); `popularity` is each
    page's own in-links plus those of the pages redirecting to it."""
    return sorted(range(len(urls)), key=lambda i: winner_key(urls[i], popularity[i], suffixes))
