"""The SQLite a process runs on: one copy of it, and under `make test` the one tools/build-sqlite.sh built.

`make test` runs the suite with ``LD_LIBRARY_PATH`` naming the newer SQLite the Makefile builds and
``QSITE_EXPECT_SQLITE`` its version (docs/deploy.md, "A newer SQLite"): a suite that fell back to the
system's SQLite without a word would test another build than the one recommended for serving.
"""

from __future__ import annotations

import io
import os
import sqlite3
import subprocess
import sys
import tarfile
from pathlib import Path

import datasette.app  # noqa: F401  (Datasette's own import of sqlite3, as in a served process)

from tests.support.paths import ROOT

BUILD_SCRIPT = ROOT / "tools" / "build-sqlite.sh"


def mapped_sqlite_libraries() -> set[str]:
    """The files named ``libsqlite3*`` mapped into this process."""
    maps = Path("/proc/self/maps").read_text(encoding="utf-8").splitlines()
    return {line.split()[-1] for line in maps if line.rsplit("/", 1)[-1].startswith("libsqlite3")}


def test_the_process_runs_one_sqlite_library_the_one_asked_for():
    mapped = mapped_sqlite_libraries()
    assert len(mapped) == 1, f"two copies of SQLite in one process: {mapped}"
    expected = os.environ.get("QSITE_EXPECT_SQLITE")
    if expected:
        assert sqlite3.sqlite_version == expected, "run `make sqlite`: LD_LIBRARY_PATH names no SQLite of that version"
        assert mapped == {str(ROOT / ".tools" / f"sqlite-{expected}" / "libsqlite3.so.0")}


def test_a_process_started_elsewhere_runs_the_same_sqlite(tmp_path):
    """What the tests start (``qsite serve``, the pipeline) runs in other folders: a relative LD_LIBRARY_PATH would lose it."""
    found = subprocess.run([sys.executable, "-c", "import sqlite3; print(sqlite3.sqlite_version)"], cwd=tmp_path,
                           capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    assert found == sqlite3.sqlite_version


def _fake_npm(bin_dir: Path, package: Path) -> None:
    """An ``npm`` whose ``pack`` writes ``package`` where the real one writes the registry's tarball."""
    npm = bin_dir / "npm"
    npm.write_text(f'#!/bin/sh\ncp "{package}" ./better-sqlite3-12.11.1.tgz\n', encoding="utf-8")
    npm.chmod(0o755)


def test_a_source_package_other_than_the_pinned_one_builds_nothing(tmp_path):
    source = b'#define SQLITE_VERSION        "3.53.2"\nint sqlite3_libversion_number(void) { return 0; }\n'
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        entry = tarfile.TarInfo("package/deps/sqlite3/sqlite3.c")
        entry.size = len(source)
        tar.addfile(entry, io.BytesIO(source))
    package = tmp_path / "package.tgz"
    package.write_bytes(buffer.getvalue())
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_npm(bin_dir, package)
    out = tmp_path / "sqlite"

    result = subprocess.run([str(BUILD_SCRIPT), str(out)], capture_output=True, text=True, timeout=60,
                            env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})

    assert result.returncode == 1
    assert "does not match its pinned sha512; nothing built" in result.stderr
    assert not out.exists()
