#!/usr/bin/env bash
# make bench: install the load generator if missing, then run bench/run.py.
# Arguments go to bench/run.py (try --help), e.g. bench/run.sh --rounds 1 --skip ingest
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v wrk >/dev/null 2>&1; then
    echo "bench: installing wrk (Debian package)" >&2
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq wrk >/dev/null
fi
exec .venv/bin/python -m bench.run "$@"
