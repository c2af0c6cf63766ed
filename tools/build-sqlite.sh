#!/usr/bin/env bash
# A newer SQLite for Python's sqlite3 module, built the way Debian builds its own: `make sqlite`.
#
#   tools/build-sqlite.sh DIR    builds DIR/libsqlite3.so.0, then checks Python's sqlite3 loads it
#
# Python's sqlite3 module links to libsqlite3.so.0, so a process started with LD_LIBRARY_PATH=DIR
# runs every connection, Datasette's and qsite's alike, through this one copy (never two copies in
# one process: docs/deploy.md, "A newer SQLite"). The same searches' SQL took 10% less time on it than
# on Debian 12's 3.40.1 (bench/README.md, "2026-11-30 10:10 to 11:30 UTC").
#
# The source is SQLite's amalgamation (sqlite3.c) as the npm package better-sqlite3 ships it: of the
# registries reachable here it is the one that carries SQLite's C source (PyPI's packages carry it
# compiled into their own modules; Debian 12's is 3.40.1). Pinned by version and by the sha512 of the
# package the registry serves; no script of the package runs (its node-gyp build is not wanted).
# The options are Debian 12's for its libsqlite3 (`pragma compile_options` there), so that the version
# is the one thing that changes; the flags are Debian's hardening flags (dpkg-buildflags).
set -euo pipefail

SQLITE_VERSION=3.53.2
PACKAGE=better-sqlite3@12.11.1
PACKAGE_SHA512=76af40b40a608393c616d0733c54819771d94231e893981a40233ace1d989346929830acd426e7548f3f1e001242434ab16169b1e20ef5b7a0e71c696216c87c
PYTHON=${PYTHON:-python3}

say() { printf 'build-sqlite: %s\n' "$*" >&2; }
[ $# -eq 1 ] || { say "usage: tools/build-sqlite.sh DIR"; exit 2; }
out=$1
command -v npm >/dev/null 2>&1 || { say "needs npm (Debian: apt-get install npm), to fetch SQLite's source"; exit 1; }
command -v cc >/dev/null 2>&1 || { say "needs a C compiler (Debian: apt-get install gcc libc6-dev)"; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack "$PACKAGE" --ignore-scripts --silent >/dev/null)
tarball=$(ls "$work"/*.tgz)
echo "$PACKAGE_SHA512  $tarball" | sha512sum --check --quiet - \
    || { say "$PACKAGE from the registry does not match its pinned sha512; nothing built"; exit 1; }
tar -xzf "$tarball" -C "$work" package/deps/sqlite3/sqlite3.c
grep -q "#define SQLITE_VERSION  *\"$SQLITE_VERSION\"" "$work/package/deps/sqlite3/sqlite3.c" \
    || { say "$PACKAGE does not carry SQLite $SQLITE_VERSION; nothing built"; exit 1; }

options=(
    -DSQLITE_ENABLE_COLUMN_METADATA -DSQLITE_ENABLE_DBSTAT_VTAB -DSQLITE_ENABLE_FTS3
    -DSQLITE_ENABLE_FTS3_PARENTHESIS -DSQLITE_ENABLE_FTS3_TOKENIZER -DSQLITE_ENABLE_FTS4 -DSQLITE_ENABLE_FTS5
    -DSQLITE_ENABLE_MATH_FUNCTIONS -DSQLITE_ENABLE_PREUPDATE_HOOK -DSQLITE_ENABLE_RTREE -DSQLITE_ENABLE_SESSION
    -DSQLITE_ENABLE_STMTVTAB -DSQLITE_ENABLE_UNLOCK_NOTIFY -DSQLITE_ENABLE_UPDATE_DELETE_LIMIT
    -DSQLITE_LIKE_DOESNT_MATCH_BLOBS -DSQLITE_MAX_SCHEMA_RETRY=25 -DSQLITE_MAX_VARIABLE_NUMBER=250000
    -DSQLITE_DEFAULT_RECURSIVE_TRIGGERS -DSQLITE_OMIT_LOOKASIDE -DSQLITE_SECURE_DELETE -DSQLITE_SOUNDEX
    -DSQLITE_TEMP_STORE=1 -DSQLITE_THREADSAFE=1 -DSQLITE_USE_URI -DHAVE_ISNAN -DHAVE_USLEEP
)
flags=(-O2 -fPIC -fstack-protector-strong -D_FORTIFY_SOURCE=2 -Wformat -Werror=format-security)
say "compiling SQLite $SQLITE_VERSION (about a minute)"
mkdir -p "$work/lib"
cc "${flags[@]}" "${options[@]}" -shared -Wl,-soname,libsqlite3.so.0 -Wl,-z,relro -Wl,-z,now \
    -o "$work/lib/libsqlite3.so.0" "$work/package/deps/sqlite3/sqlite3.c" -lpthread -ldl -lm

found=$(LD_LIBRARY_PATH="$work/lib" "$PYTHON" -c 'import sqlite3; print(sqlite3.sqlite_version)')
[ "$found" = "$SQLITE_VERSION" ] \
    || { say "Python's sqlite3 ($PYTHON) loaded SQLite $found, not the $SQLITE_VERSION built; nothing installed"; exit 1; }
mkdir -p "$out"
mv "$work/lib/libsqlite3.so.0" "$out/libsqlite3.so.0"
say "$out/libsqlite3.so.0: SQLite $SQLITE_VERSION"
