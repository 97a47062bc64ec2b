"""The web UI's tests share one private copy of the demo run and one live server on it per
module."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from door_server import serving

from neardup.ui import create_app


@pytest.fixture(scope="module")
def ui_run(demo_run, tmp_path_factory) -> Path:
    """A copy of the demo run the module may write into (its search index, caches)."""
    run = tmp_path_factory.mktemp("ui") / "run"
    shutil.copytree(demo_run.path, run)
    return run


@pytest.fixture(scope="module")
def server(ui_run):
    """A live uvicorn server on 127.0.0.1 (free port), stopped after the module."""
    with serving(create_app(ui_run)) as url:
        yield url
