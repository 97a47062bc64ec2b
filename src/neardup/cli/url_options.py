"""The options that choose which pages are compared by their URL, shared by `scan`,
`dedup`, `crawl` and `add` (`ingest/eligibility.py` is the rule). Apart from
`scan_options.py` so that `add`'s module, which also holds `serve`, loads no scan code.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from neardup.config import Settings, SettingsError

CrawlerFiles = Annotated[
    bool,
    typer.Option(
        help="also compare a crawler's own files (robots.txt, sitemaps, favicon.ico, ads.txt, "
        "/.well-known/..., skipped by default as 'crawler file')"
    ),
]
# Regular expressions rather than globs: a URL's ?, & and * would be glob syntax, and wget's
# --accept-regex/--reject-regex, which crawl operators know, work this way.
IncludeUrl = Annotated[
    list[str] | None,
    typer.Option(
        "--include-url",
        metavar="REGEX",
        help="compare only pages whose URL this regular expression is found in (Python "
        "syntax, searched anywhere in the URL as wget's --accept-regex; repeatable: any one "
        r"suffices; e.g. '^https://example\.com/docs/')",
    ),
]
ExcludeUrl = Annotated[
    list[str] | None,
    typer.Option(
        "--exclude-url",
        metavar="REGEX",
        help="skip pages whose URL this regular expression is found in (as wget's "
        r"--reject-regex; repeatable; e.g. '[?&]sessionid=' or '(?i)\.pdf$'); skipped pages "
        "are counted as 'excluded by URL pattern'",
    ),
]


def url_patterns(include_url: list[str] | None, exclude_url: list[str] | None) -> dict[str, Any]:
    """The `Settings` fields of --include-url/--exclude-url (only those given), checked: a
    pattern that is no regular expression raises `SettingsError` naming its option."""
    given = {"include_url": include_url, "exclude_url": exclude_url}
    patterns = {k: tuple(v) for k, v in given.items() if v}
    try:
        Settings(**patterns)
    except SettingsError as err:
        message = str(err)
        for name in given:
            message = message.replace(name, "--" + name.replace("_", "-"))
        raise SettingsError(message) from None
    return patterns
