#!/usr/bin/env bash
# Set everything up, generate a realistic multi-host crawl offline, and scan it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --plain
export PATH="$PWD/.venv/bin:$PATH"
neardup demo-crawl demo/crawl --force
neardup scan demo/crawl/warc/*.warc.gz --out demo/run --force
neardup clusters demo/run --top 10
neardup dedup --run demo/run --out demo/clean --force
neardup collections demo/run --top 5
neardup mirrors demo/run
neardup report demo/run -o demo/report.html --force
echo "open demo/report.html, or explore it in the browser: .venv/bin/pip install -e '.[service]' && .venv/bin/neardup ui demo/run"
