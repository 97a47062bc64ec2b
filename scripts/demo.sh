#!/usr/bin/env bash
# Set everything up, generate a realistic multi-host crawl offline, and scan it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh --plain --no-precompile
export PATH="$PWD/.venv/bin:$PATH"
# The kernels compiled ahead of time (kernels/ahead.py: about 40 s on 2 cores, once), beside
# the crawl's generation, which runs no kernel; its lines wait, so the compile's progress is
# drawn alone. The scan comes after both: on numba's JIT it would cost more than the compile.
crawl_log=$(mktemp)
neardup demo-crawl demo/crawl --force >"$crawl_log" 2>&1 &
crawling=$!
if ! neardup precompile --if-stale; then
    echo "demo: the kernels were not compiled ahead of time; the scan starts the JIT" >&2
fi
wait "$crawling" || { cat "$crawl_log" >&2; exit 1; }
cat "$crawl_log"
rm -f "$crawl_log"
neardup scan demo/crawl/warc/*.warc.gz --out demo/run --force
neardup clusters demo/run --top 10
neardup dedup --run demo/run --out demo/clean --force
neardup collections demo/run --top 5
neardup mirrors demo/run
neardup report demo/run -o demo/report.html --force
echo "open demo/report.html, or explore it in the browser: .venv/bin/pip install -e '.[service]' && .venv/bin/neardup ui demo/run"
