"""Shared fixtures: a small generated crawl, scanned once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest

import neardup
from neardup.synth import generate_demo_crawl

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


def shared_data(*parts: str) -> Path:
    """A path under ../shared/data, or skip the test when that folder is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent (real data only exists on developer machines and CI)")
    return path


@pytest.fixture(scope="session")
def demo_crawl(tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("demo-crawl")
    return generate_demo_crawl(out, n_docs=60, seed=3, n_unrelated=20)


@pytest.fixture(scope="session")
def demo_run(demo_crawl, tmp_path_factory: pytest.TempPathFactory):
    out = tmp_path_factory.mktemp("runs") / "run"
    return neardup.scan(demo_crawl.warc_paths, out, workers=2)
