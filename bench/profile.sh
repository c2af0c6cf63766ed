#!/usr/bin/env bash
# Profile before optimising: py-spy samples `qsite serve` under wrk load (news,
# news 304, Datasette's news JSON, distinct uncached pages at a million items)
# and a full + unchanged news ingest, then
# prints the hottest functions. Collapsed stacks land in bench/results/profile-*.txt
# (feed them to flamegraph.pl or speedscope for a picture).
# Arguments go to bench/run.py, e.g. bench/profile.sh --skip ingest
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv-test/bin/py-spy ]; then
    # py-spy is the `profile` extra in uv.lock; `make dev` removes it again.
    echo "bench: py-spy is not in .venv-test: run \`make profile\` (installs it from uv.lock, then runs this script)" >&2
    exit 2
fi
exec .venv-test/bin/python -m bench.run --profile --rounds 1 --ingest-repeats 1 --visibility-trials 1 "$@"
