"""qsite as a user installs it: the built wheel in a fresh virtual environment, beside a chosen Datasette.

Not the editable checkout: nothing of the repository is importable there, so a
file the wheel forgot to ship shows. uv (the Makefile's, from PyPI) builds the
wheel and installs it; the other packages are held at uv.lock's versions
(a constraints file), all but Datasette, which is the one the caller names, so
the install is the lock's, from uv's cache.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.paths import ROOT

UV_VERSION = next(
    line.split(":=")[1].strip() for line in (ROOT / "Makefile").read_text().splitlines() if line.startswith("UV_VERSION :=")
)
#: The Makefile's uv (``make dev`` installs it).
UV = ROOT / ".tools" / f"uv-{UV_VERSION}" / "bin" / "uv"


def _uv(*args: str, cwd: Path = ROOT, timeout: float = 600) -> str:
    result = subprocess.run([str(UV), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if result.returncode:
        raise RuntimeError(f"uv {' '.join(args)} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result.stdout


def build_wheel(out: Path) -> Path:
    """Build qsite's wheel from the checkout into ``out``; returns its path."""
    _uv("build", "--wheel", "--quiet", "--out-dir", str(out))
    (wheel,) = out.glob("qsite-*.whl")
    return wheel


def lock_constraints(out: Path, without: tuple[str, ...] = ("datasette",)) -> Path:
    """uv.lock's runtime versions as a pip constraints file, leaving out the packages named in ``without``."""
    text = _uv("export", "--frozen", "--no-hashes", "--no-emit-project", "--no-header", "--format", "requirements-txt")
    lines = [
        line for line in text.splitlines()
        if line.strip() and not line.lstrip().startswith("#") and line.split("==")[0].strip().lower() not in without
    ]
    path = out / "constraints.txt"
    path.write_text("\n".join(lines) + "\n")
    return path


def venv_with(where: Path, wheel: Path, *requirements: str) -> Path:
    """A fresh venv at ``where`` with ``wheel`` and ``requirements`` installed (resolved together); returns its bin folder.

    :raises RuntimeError: with uv's message, when they do not resolve together.
    """
    _uv("venv", "--quiet", "--python", "python3", str(where))
    python = where / "bin" / "python"
    constraints = lock_constraints(where)
    _uv("pip", "install", "--quiet", "--python", str(python), "-c", str(constraints), str(wheel), *requirements)
    return where / "bin"
