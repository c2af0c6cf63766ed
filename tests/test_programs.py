"""A test needing a program from outside Python fails before it starts, in one line naming the program and its install command.

Run as a real pytest session over a small test folder that uses this suite's
hooks (tests/conftest.py) and a program no machine has.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.paths import ROOT

CONFTEST = '''
from tests.conftest import pytest_runtest_setup, pytest_sessionstart
from tests.support.programs import PROGRAMS, Program

PROGRAMS["qsite-nothing"] = Program(("qsite-no-such-program",), "apt-get install qsite-nothing")


def pytest_configure(config):
    config.addinivalue_line("markers", "requires(*programs): as in pyproject.toml")
'''

TESTS = '''
import pytest

@pytest.mark.requires("qsite-nothing")
def test_needs_it():
    raise AssertionError("never reached: the program is missing")

def test_needs_nothing():
    pass
'''


@pytest.mark.slow
def test_a_missing_program_is_one_line_naming_its_install_command(tmp_path):
    (tmp_path / "conftest.py").write_text(CONFTEST, encoding="utf-8")
    (tmp_path / "test_needs.py").write_text(TESTS, encoding="utf-8")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        capture_output=True, text=True, timeout=120, cwd=tmp_path, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    out = result.stdout
    line = "qsite-nothing is not installed; install it with: apt-get install qsite-nothing"
    assert result.returncode == 1, out
    assert out.splitlines()[0].startswith("missing programs (the tests that need them fail at once): ") and line in out.splitlines()[0]
    assert "1 passed, 1 error" in out
    assert "Traceback" not in out and "never reached" not in out and "raise " not in out
    assert len(out.splitlines()) <= 12, out  # the header, the error's one line, the summary
