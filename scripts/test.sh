#!/usr/bin/env bash
# Set everything up, then run the linters, the layer and dependency checks, and all tests.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tests bench
.venv/bin/ruff format --check src tests bench
.venv/bin/lint-imports          # layers only import downwards (docs/architecture.md)
.venv/bin/deptry src            # the dependency list in pyproject.toml is the one the code uses
.venv/bin/python -m pytest "$@"
