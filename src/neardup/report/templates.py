"""The Jinja2 environment shared by the report and the web UI.

Templates are package data (`neardup/report/templates/*.html.j2`, `neardup/ui/templates/`),
autoescaped, with a few number filters so every page formats figures the same way.
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined

from neardup.report.data import human_bytes


def _num(value: Any) -> str:
    return "–" if value is None else f"{value:,}"


def _pct(value: float | None, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}%}"


def _share(part: float | None, whole: float | None) -> str:
    if part is None or not whole:
        return "–"
    return f"{part / whole:.1%}"


def script_json(data: Any) -> str:
    """JSON safe inside a <script> element (no `</` to close it early)."""
    return json.dumps(data, default=str, ensure_ascii=False).replace("</", "<\\/")


@cache
def environment(*packages: str) -> Environment:
    """The report's templates, plus those of `packages` (the UI passes its own), loaded once.

    The report never names the UI: the UI sits above it and needs FastAPI, which a plain
    install leaves out."""
    loaders = [PackageLoader(p, "templates") for p in packages]
    env = Environment(
        loader=ChoiceLoader([*loaders, PackageLoader("neardup.report", "templates")]),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(num=_num, pct=_pct, share=_share, bytes=human_bytes)
    env.globals["zip"] = zip
    return env
