"""Indexes written by an older neardup, brought to the current files once, by a writer.

Two conversions: an index kept in one DuckDB file (neardup before issue 26) is rewritten as
the versioned files (`convert_legacy`), and the pages of an index written before slots were
kept are saved again with a slot per row (`give_slots`), the key of the graph's saved
arrays. Both write and commit with the files room's own functions, so an opening of the
current files never meets either shape.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from neardup.index.files.manifest_meta import stored_config
from neardup.index.files.saves import write_segment
from neardup.index.files.store import (
    GROUP_SCHEMA,
    LEGACY_DB,
    PAGE_SCHEMA,
    Manifest,
    Segment,
    commit,
    legacy_rows,
    remove_leftovers,
    segment_name,
)
from neardup.kernels import fingerprint64


def convert_legacy(store: Path) -> Manifest:
    """Rewrite an index kept in one DuckDB file (neardup before issue 26) as the
    versioned files, once; the old file is kept beside, renamed."""
    db = store / LEGACY_DB
    print(
        f"neardup: converting {db} to the versioned column files (once)",
        file=sys.stderr,
        flush=True,
    )
    stored, pages, groups = legacy_rows(db)
    settings, options = stored_config(stored)
    num_perm, dims = settings.num_perm, options.dims
    n = pages.num_rows
    sigs = np.zeros((n, num_perm), dtype=np.uint32)
    lens = np.zeros((n, dims), dtype=np.int32)
    has = np.zeros(n, dtype=bool)
    length = pages.column("length").to_numpy(zero_copy_only=False)
    sfp = pages.column("shingle_fp").to_pylist()
    ntok = pages.column("n_tokens").to_pylist()
    for i, (sig, dl) in enumerate(
        zip(
            pages.column("signature").to_pylist(),
            pages.column("dim_lengths").to_pylist(),
            strict=True,
        )
    ):
        if sig is None:
            continue
        has[i] = True
        sigs[i] = np.frombuffer(sig, dtype="<u4")
        if dl and len(dl) == dims:
            lens[i] = dl
        else:  # a store written before the length mapping: spread evenly
            lens[i] = int(length[i] or 0) // dims
        # A store written before the scan's graph: the signature stands for the set.
        if sfp[i] is None:
            sfp[i] = fingerprint64(sig)
        if ntok[i] is None:
            ntok[i] = int(length[i] or 0)
    table = pa.table(
        {
            "url": pages.column("url"),
            "group_id": pages.column("group_id"),
            "length": pages.column("length").cast(pa.int32()),
            "has_signature": pa.array(has),
            "exact_fp": pages.column("exact_fp"),
            "redirect_to": pages.column("redirect_to"),
            "links_in": pages.column("links_in").cast(pa.int32()),
            "verified": pages.column("verified"),
            "removed": pages.column("removed"),
            "shingle_fp": pa.array(sfp, pa.int64()),
            "page_key": pa.nulls(n, pa.int64()),
            "n_tokens": pa.array(ntok, pa.int32()),
            "slot": pa.array(np.arange(n, dtype=np.int64)),
            "version": pa.array(np.ones(n, np.int64)),
        },
        schema=PAGE_SCHEMA,
    )
    gtable = groups.cast(GROUP_SCHEMA)
    name = segment_name(1)
    write_segment(store, name, Segment(table, sigs, lens, gtable))
    meta: dict[str, Any] = {
        "settings": stored["settings"],
        "options": stored["options"],
        "next_group": int(stored.get("next_group", "1")),
        "num_perm": num_perm,
        "dims": dims,
    }
    if "length_map" in stored:
        meta["length_map"] = json.loads(stored["length_map"])
    manifest = Manifest(1, [name], [n], meta)
    commit(store, manifest)
    os.replace(db, store / f"{LEGACY_DB}.converted")
    with contextlib.suppress(FileNotFoundError):
        (store / f"{LEGACY_DB}.wal").unlink()
    return manifest


def give_slots(store: Path, manifest: Manifest, state: Segment) -> tuple[Manifest, Segment]:
    """Save the pages of an index written before slots were kept (issue 26) once as one
    segment with a slot per row (its place when opened), the key of the graph's saved
    arrays; committed as a version of its own."""
    n = state.pages.num_rows
    version = manifest.version + 1
    pages = state.pages.drop_columns(["slot", "version"])
    pages = pages.append_column("slot", pa.array(np.arange(n, dtype=np.int64)))
    pages = pages.append_column("version", pa.array(np.full(n, version, np.int64)))
    seg = Segment(pages.cast(PAGE_SCHEMA), state.signatures, state.dim_lengths, state.groups)
    name = segment_name(version)
    write_segment(store, name, seg)
    new = Manifest(version, [name], [n], manifest.meta)
    commit(store, new)
    remove_leftovers(store, new)
    return new, seg
