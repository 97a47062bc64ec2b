"""neardup: near-duplicate pages, mirrors and replicated collections in web crawls.

The Python API mirrors the command line:

>>> import neardup
>>> result = neardup.scan(["crawl.warc.gz"], "run/")  # doctest: +SKIP
>>> neardup.resemblance("a rose is a rose is a rose", "a rose is a rose")  # doctest: +SKIP
>>> with neardup.open_index("idx/") as ix:  # doctest: +SKIP
...     ix.add("https://a.example/", text="a rose is a rose is a rose")

Names are imported on first use, so `import neardup` stays cheap (no numba, no DuckDB)
for tools that only need part of the package.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "scan": "neardup.pipeline.scan",
    "ScanResult": "neardup.pipeline.scan",
    "InputError": "neardup.ingest.readers",  # an input that is missing or of no known kind
    "PathsFileError": "neardup.ingest.paths_file",  # a bad paths file, sample= or shard=
    "OutputError": "neardup.store.outputs",
    "OutputExistsError": "neardup.store.outputs",
    "Settings": "neardup.config",
    "SettingsError": "neardup.config",
    "write_deduplicated": "neardup.pipeline.dedup",
    "DedupResult": "neardup.pipeline.dedup",
    "open_run": "neardup.store",
    "RunError": "neardup.store",
    "sketch": "neardup.api",
    "shingle_set": "neardup.api",
    "resemblance": "neardup.api",
    "contained": "neardup.api",
    "open_index": "neardup.index.handle",
    "DuplicateIndex": "neardup.index.handle",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'neardup' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
