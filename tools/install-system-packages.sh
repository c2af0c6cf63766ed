#!/usr/bin/env bash
# The Debian packages the tests need (programs from outside Python; tests/support/programs.py says
# which test runs which). `make test` runs this first: with nothing missing it does nothing; as root
# (or with password-less sudo) it installs what is missing with apt-get; otherwise it stops, before
# any test runs, with the one command that installs them. `.ci/run` reaches it through `make test`.
#
#   tools/install-system-packages.sh          install what is missing (or say how)
#   tools/install-system-packages.sh --check  only list what is missing; exit 1 if anything is
set -euo pipefail

check_only=false
[ "${1:-}" = "--check" ] && check_only=true

need=()
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }
# redis-server: the rate limits and caches shared by workers (tests/test_ratelimit.py, the cluster)
have redis-server || need+=(redis-server)
# nginx: the load balancer with proxy_cache in the snapshot topology test (tests/test_cluster.py),
# and the shipped deploy/nginx.conf (tests/test_nginx.py)
have nginx || need+=(nginx)
# tests/test_dashboard.py and test_docs_browser.py drive the machine's Chromium (Playwright never downloads a browser here)
have chromium || have chromium-browser || need+=(chromium)
# prlimit: tests/test_connections.py runs qsite serve under a 1024 open-file limit; fincore (the same
# package): tests/test_bench.py counts a file's pages in the page cache
{ have prlimit && have fincore; } || need+=(util-linux)
# vmtouch: make bench holds its million-item database in the page cache with it (tests/test_bench.py)
have vmtouch || need+=(vmtouch)
# openssl: a self-signed certificate for nginx ending TLS in tests/test_nginx.py
have openssl || need+=(openssl)
# promtool (Debian's prometheus package): the alert rules and dashboard queries of deploy/monitoring/ (tests/test_monitoring.py)
have promtool || need+=(prometheus)
# a C compiler: `make test` builds the newer SQLite the suite runs on (tools/build-sqlite.sh)
have cc || need+=(gcc libc6-dev)
# the OpenAPI linters (tools/package.json, `make tools`)
have node || need+=(nodejs)
have npm || need+=(npm)

[ ${#need[@]} -eq 0 ] && exit 0

say() { printf 'install-system-packages: %s\n' "$*" >&2; }
if $check_only; then
    say "missing Debian packages: ${need[*]}"
    exit 1
fi

if [ "$(id -u)" -eq 0 ]; then
    sudo=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo=(sudo -n)
else
    sudo=(none)
fi
if ! command -v apt-get >/dev/null 2>&1 || [ "${sudo[0]:-}" = none ]; then
    say "the tests need these Debian packages, which are not installed: ${need[*]}"
    if command -v apt-get >/dev/null 2>&1; then
        say "run this once (as root), then make test again:"
        printf '\n    sudo %s\n\n' "$(cd "$(dirname "$0")" && pwd)/install-system-packages.sh" >&2
    else
        say "this is not a Debian-like system (no apt-get): install the programs of that list with its package manager, then make test again"
    fi
    exit 1
fi

say "installing ${need[*]} with apt-get"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
# The tests start their own redis-server and nginx on loopback ports: keep the packages'
# services from starting on install (and nginx from taking port 80).
if [ ! -e /usr/sbin/policy-rc.d ]; then
    "${sudo[@]}" sh -c "printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d && chmod +x /usr/sbin/policy-rc.d"
    trap '"${sudo[@]}" rm -f /usr/sbin/policy-rc.d' EXIT
fi
"${sudo[@]}" apt-get install -y -qq "${need[@]}" >/dev/null
