"""What a committed version's manifest says besides its segments: the settings and options
the index was written with, the next group id, tier 2's length grid, the saved graph and the
graph's changes since that save.

Why a module of its own: the opening, the saves, the conversion of an older index and
`neardup add` all read or write these keys, and each used to spell them where it was.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from neardup.config import Settings, SettingsError
from neardup.index.files.store import Manifest, graph_name
from neardup.index.state.tier2 import SignatureStore
from neardup.index.state.updates import ServiceError, ServiceOptions

TIER2_MODES = ("bands", "lengths", "lsh")  # how `check` finds a text's stored neighbours


def stored_config(meta: Mapping[str, Any]) -> tuple[Settings, ServiceOptions]:
    """The settings and options an index was written with: a committed version's (its
    manifest's `meta`), or an older neardup's (its `settings` table)."""
    options = ServiceOptions(**_tuple_lists(json.loads(meta["options"])))
    return Settings.from_json(meta["settings"]), options


def opened_config(
    manifest: Manifest | None, settings: Settings | None, options: ServiceOptions | None
) -> tuple[Settings, ServiceOptions]:
    """The settings and options an index opens with: a stored index's own (settings given
    must agree with them: sketches, pages and threshold; options given replace the stored
    ones), else those given or the defaults. Options out of their bounds are refused."""
    if manifest is not None:
        mine, stored = stored_config(manifest.meta)
        if settings is not None:
            mine.check_compatible(settings)
            mine.check_same_pages(settings)
            if settings.threshold != mine.threshold:
                raise SettingsError(
                    f"threshold: {settings.threshold!r} here, {mine.threshold!r} in the index"
                )
        settings, options = mine, options if options is not None else stored
    else:
        settings, options = settings or Settings(), options or ServiceOptions()
    if options.tier2 not in TIER2_MODES:
        modes = ", ".join(TIER2_MODES)
        raise ServiceError(f"tier2 must be one of {modes}, not {options.tier2!r}")
    if options.dims < 1 or options.parts < 1 or options.rho < 1:
        raise ServiceError("dims and parts must be >= 1 and rho >= 1")
    return settings, options


def version_meta(
    settings: Settings,
    options: ServiceOptions,
    next_group: int,
    graph: dict[str, Any] | None = None,
    changes: dict[str, Any] | None = None,
    store_rows: SignatureStore | None = None,
) -> dict[str, Any]:
    """A version's `meta`: settings, options, the next group id, the saved graph and its
    changes (when there are), and tier 2's length grid (when it has one)."""
    meta: dict[str, Any] = {
        "settings": settings.to_json(),
        "options": json.dumps(options.__dict__),
        "next_group": next_group,
        "num_perm": settings.num_perm,
        "dims": options.dims,
    }
    if graph is not None:
        meta["graph"] = graph
    if changes is not None:
        meta["changes"] = changes
    if store_rows is not None and store_rows.map is not None:
        meta["length_map"] = {"edges": store_rows.map.to_json(), "rows": store_rows.map_rows}
    return meta


def saved_at(manifest: Manifest) -> int | None:
    """The version whose pages, groups and winners the manifest's graph folder holds
    beside the graph (`index_saves.save_graph`); None when it holds the graph only (an
    older neardup's) or there is none."""
    graph = manifest.meta.get("graph")
    return None if graph is None or "pages" not in graph else int(graph["version"])


def changes_of(manifest: Manifest) -> dict[str, Any] | None:
    """The graph's changes the version names, when they were written against its save."""
    changes = manifest.meta.get("changes")
    graph = graph_name(manifest)
    return changes if changes is not None and changes.get("graph") == graph else None


def _tuple_lists(d: dict[str, Any]) -> dict[str, Any]:
    return {k: tuple(v) if isinstance(v, list) else v for k, v in d.items()}
