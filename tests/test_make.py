"""The README's two commands on a fresh copy of the project: ``make up`` serves, ``make test``'s
environment is not ``make up``'s, and ``make test`` reports every part of the suite.

The copy holds the files git tracks, as a fresh clone does (the working tree's versions), with
this checkout's ``.tools`` (uv) linked in; uv installs from its cache, offline (``UV_OFFLINE``):
the only network is loopback. What comes from outside Python (the Debian packages) is the
machine's; ``tools/install-system-packages.sh`` is checked on its own below.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
from pathlib import Path

import httpx
import pytest

from tests.support.paths import ROOT
from tests.support.processes import free_port, wait_until

pytestmark = pytest.mark.slow

#: make's environment: uv offline (its cache kept), and no variables of the running test session's make.
ENV = {
    **{k: v for k, v in os.environ.items()
       if k == "UV_CACHE_DIR" or not k.startswith(("MAKE", "MFLAGS", "QSITE_", "UV_", "VIRTUAL_ENV"))},
    "UV_OFFLINE": "1",
}


@pytest.fixture(scope="module")
def fresh(tmp_path_factory) -> Path:
    """The tracked files of this checkout, copied into a new folder, and this checkout's uv."""
    folder = tmp_path_factory.mktemp("fresh") / "qsite"
    folder.mkdir()
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.decode()
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_symlink():  # as git checks them out (qsite/service -> ../service): links, not copies
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            (folder / name).symlink_to(os.readlink(source))
        elif source.is_file():
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, folder / name)
    (folder / ".tools").symlink_to(ROOT / ".tools")
    return folder


def make(folder: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "--no-print-directory", *args], cwd=folder, env=ENV, capture_output=True, text=True,
                          timeout=timeout)


def has_pytest(venv: Path) -> bool:
    return subprocess.run([venv / "bin" / "python", "-c", "import pytest"], capture_output=True).returncode == 0


def test_make_up_serves_a_fresh_copy_from_an_environment_the_tests_do_not_use(fresh, tmp_path):
    dev = make(fresh, "dev")
    assert dev.returncode == 0, dev.stdout + dev.stderr
    assert has_pytest(fresh / ".venv-test")
    port = free_port()
    log = tmp_path / "up.log"
    with open(log, "wb") as output:
        up = subprocess.Popen(["make", "up", f"PORT={port}"], cwd=fresh, env=ENV, stdout=output, stderr=subprocess.STDOUT,
                              start_new_session=True)
    try:
        def serving():
            try:
                return httpx.get(f"http://127.0.0.1:{port}/api/v1/stats", timeout=5).status_code == 200
            except httpx.HTTPError:
                return up.poll() is not None

        assert wait_until(serving, 240, 0.5) and up.poll() is None, log.read_text()
        stats = httpx.get(f"http://127.0.0.1:{port}/api/v1/stats", timeout=10).json()
        assert stats["courses"] == 6 and stats["news_items"] > 0
        # make up synced .venv to the runtime packages only, and left the tests' environment whole
        assert not has_pytest(fresh / ".venv") and has_pytest(fresh / ".venv-test")
        again = make(fresh, "install")  # a second make up's sync, while the tests' environment is in use
        assert again.returncode == 0 and has_pytest(fresh / ".venv-test")
    finally:
        if up.poll() is None:
            os.killpg(up.pid, signal.SIGINT)  # Ctrl-C, as the README says
            try:
                up.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(up.pid, signal.SIGKILL)
                up.wait()


def test_make_test_runs_the_serial_part_after_a_failing_parallel_part_and_fails(fresh):
    if not (fresh / ".venv-test").exists():
        assert make(fresh, "dev").returncode == 0
    tests = fresh / "tests"
    shutil.rmtree(tests)
    tests.mkdir()
    marker = fresh / "serial-ran"
    (tests / "test_parallel.py").write_text("def test_fails():\n    assert False, 'the parallel part fails'\n")
    serial = "mark." + "serial"  # spelt so that the Makefile's grep for serial files skips this file
    (tests / "test_timed.py").write_text(
        f"import pathlib, pytest\n\n@pytest.{serial}\ndef test_runs():\n    pathlib.Path({str(marker)!r}).touch()\n"
    )
    done = make(fresh, "test-run", "TEST_WORKERS=1")
    assert done.returncode != 0, done.stdout + done.stderr
    assert "1 failed" in done.stdout and "1 passed" in done.stdout, done.stdout
    assert marker.exists()


def test_the_system_packages_script_stops_before_anything_with_the_command_to_run(tmp_path, request):
    """Without root and with a program missing, it installs nothing and names what to run."""
    script = ROOT / "tools" / "install-system-packages.sh"
    # a PATH with the shell's own tools only: redis-server, nginx and the rest are missing there
    # (a folder of its own under the system's temporary folder, which another user may enter)
    bin_dir = Path(tempfile.mkdtemp(prefix="qsite-bin-"))
    request.addfinalizer(lambda: shutil.rmtree(bin_dir, ignore_errors=True))
    bin_dir.chmod(0o755)
    for name in ("bash", "id", "dirname", "sh", "printf", "apt-get"):
        if found := shutil.which(name):
            (bin_dir / name).symlink_to(found)
    env = {"PATH": str(bin_dir), "HOME": str(bin_dir)}
    checked = subprocess.run([script, "--check"], env=env, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 1 and "redis-server" in checked.stderr and "chromium" in checked.stderr
    if os.geteuid() == 0:  # run it as nobody, who may not install
        # from a copy nobody can reach: a checkout may sit in a folder only its owner enters (mktemp -d)
        (bin_dir / "tools").mkdir(mode=0o755)
        script = Path(shutil.copy2(script, bin_dir / "tools" / script.name))
        command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(script)]
        if not shutil.which("setpriv"):
            pytest.skip("setpriv (util-linux) is needed to run the script as another user")
        (bin_dir / "setpriv").symlink_to(shutil.which("setpriv"))
    else:
        command = [str(script)]
    refused = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert refused.returncode == 1, refused.stderr
    assert "redis-server" in refused.stderr and f"sudo {script}" in refused.stderr, refused.stderr
