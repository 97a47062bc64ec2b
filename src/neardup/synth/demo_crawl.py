"""The demo crawl on disk: `generate_demo_crawl` writes WARC files, truth and topology.

Apart from `crawl.py` because building records and writing them into a replaceable output
folder are separate concerns: tests build crawls in memory, the CLI writes them.
"""

from __future__ import annotations

import csv
import json
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa

from neardup.store.outputs import replacing_folder
from neardup.synth.crawl import SyntheticCrawl
from neardup.synth.crawl_builder import CRAWL_START
from neardup.synth.writers import write_warc


@dataclass
class DemoCrawl:
    """What `generate_demo_crawl` wrote: WARC files, truth and topology."""

    out_dir: Path
    warc_paths: list[Path]
    truth: list[dict[str, Any]]
    topology: dict[str, Any]
    warc_records: int
    seconds: float

    @property
    def warc_dir(self) -> Path:
        return self.out_dir / "warc"

    def truth_table(self) -> pa.Table:
        return pa.Table.from_pylist(self.truth)

    def groups(self) -> dict[str, list[str]]:
        """URLs of the expected pages per original document: who copies whom."""
        out: dict[str, list[str]] = {}
        for row in self.truth:
            if row["expected"] == "page":
                out.setdefault(row["original"], []).append(row["url"])
        return out


def generate_demo_crawl(
    out_dir: str | Path, n_docs: int = 250, seed: int = 0, force: bool = False, **params: Any
) -> DemoCrawl:
    """Write the demo crawl and its answers, offline, in a few seconds.

    Writes `out_dir/warc/crawl-<day>-<k>.warc.gz` (3 files, one per crawl day),
    `out_dir/truth.csv` (one row per response/revisit) and `out_dir/topology.json`. The
    answers lie beside, not among, the WARC files, so scanning `out_dir/warc` sees only the
    crawl. Extra `params` go to `SyntheticCrawl`.
    """
    started = time.perf_counter()
    out = Path(out_dir)
    crawl = SyntheticCrawl(n_docs=n_docs, seed=seed, **params)
    records = crawl.build()
    with replacing_folder(out, "demo crawl", force=force) as staging:
        warc_dir = staging / "warc"
        warc_dir.mkdir()
        written, total = [], 0
        for file in sorted({r.warc_file for r in records}):
            day = (CRAWL_START + timedelta(days=file)).strftime("%Y%m%d")
            path = warc_dir / f"crawl-{day}-{file:05d}.warc.gz"
            batch = [r for r in records if r.warc_file == file]
            info = {"description": f"neardup synthetic demo crawl, seed {seed}, day {file}"}
            total += write_warc(path, batch, info=info)
            written.append(path.name)
        truth = crawl.truth()
        with (staging / "truth.csv").open("w", newline="", encoding="utf-8") as fh:
            writer = csv.DictWriter(fh, fieldnames=list(truth[0]))
            writer.writeheader()
            writer.writerows(truth)
        topology = crawl.topology()
        (staging / "topology.json").write_text(
            json.dumps(topology, indent=2) + "\n", encoding="utf-8"
        )
    paths = [out / "warc" / name for name in written]
    return DemoCrawl(out, paths, truth, topology, total, time.perf_counter() - started)
