#!/usr/bin/env bash
# Create .venv (if missing) and install neardup with its test tools. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Debian packages: Chromium, driven by Playwright in the web-UI tests (never a downloaded
# browser), and a Java runtime for the Spark engine and its tests.
NEED=()
[ -x /usr/bin/chromium ] || NEED+=(chromium)
command -v java >/dev/null || NEED+=(openjdk-17-jre-headless)
if [ ${#NEED[@]} -gt 0 ] && command -v apt-get >/dev/null; then
    SUDO=""
    [ "$(id -u)" -ne 0 ] && SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${NEED[@]}" >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
    "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[dev,spark]'
