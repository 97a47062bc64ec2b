#!/usr/bin/env bash
# Create .venv (if missing) and install neardup. Idempotent.
#   setup.sh          neardup with its test tools: the [dev] extra (which brings [service] and
#                     [spark]), plus Debian's chromium (web-UI tests, driven by Playwright; never a
#                     downloaded browser) and a Java runtime (the Spark engine and its tests)
#   setup.sh --plain  a plain `pip install neardup`: scan, dedup, report; no system packages
#   --no-precompile   leave the kernels' compiling ahead of time to the caller (demo.sh runs
#                     it beside the crawl's generation)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
MODE=full
PRECOMPILE=yes
for arg in "$@"; do
    case "$arg" in
        --plain) MODE=--plain ;;
        --no-precompile) PRECOMPILE=no ;;
        *) echo "setup.sh: unknown option $arg" >&2; exit 2 ;;
    esac
done
if [ "$MODE" != "--plain" ]; then
    NEED=()
    [ -x /usr/bin/chromium ] || NEED+=(chromium)
    command -v java >/dev/null || NEED+=(openjdk-17-jre-headless)
    if [ ${#NEED[@]} -gt 0 ] && command -v apt-get >/dev/null; then
        SUDO=""
        [ "$(id -u)" -ne 0 ] && SUDO="sudo"
        $SUDO apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${NEED[@]}" >/dev/null
    fi
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
if [ "$MODE" = "--plain" ]; then
    .venv/bin/python -m pip install --quiet -e .
else
    .venv/bin/python -m pip install --quiet -e '.[dev]'
fi
# The kernels compiled ahead of time, so that small commands start no JIT (about 40 s on
# 2 cores, once, and again after an edit of a kernel; kernels/ahead.py). Without a C compiler
# a plain install goes on without them: its commands then start numba's JIT, which gives the
# same results.
[ "$PRECOMPILE" = yes ] || exit 0
if ! .venv/bin/neardup precompile --if-stale; then
    [ "$MODE" = "--plain" ] || exit 1
    echo "setup: the kernels were not compiled ahead of time; small commands start the JIT" >&2
fi
