#!/usr/bin/env bash
# make bench: install the load generator and vmtouch if missing, then run bench/run.py.
# Arguments go to bench/run.py (try --help), e.g. bench/run.sh --rounds 1 --skip ingest
set -euo pipefail
cd "$(dirname "$0")/.."
# wrk, the load generator; vmtouch, which holds the million-item database in the page cache
# (bench/harness.py: hold_resident)
need=()
command -v wrk >/dev/null 2>&1 || need+=(wrk)
command -v vmtouch >/dev/null 2>&1 || need+=(vmtouch)
if [ ${#need[@]} -gt 0 ]; then
    echo "bench: installing ${need[*]} (Debian packages)" >&2
    if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
    $SUDO apt-get update -qq && $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
exec .venv-test/bin/python -m bench.run "$@"
