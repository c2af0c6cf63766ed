"""Real processes for the tests: the ``qsite`` command, a running ``qsite serve``, and how to wait for and stop them."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator, Sequence

import httpx

from tests.support.forked_qsite import ForkedProcess, forkable, run_forked

#: The installed ``qsite`` console command, next to the interpreter running the tests.
QSITE = str(Path(sys.executable).with_name("qsite"))


def run_qsite(*args, env: dict | None = None, timeout: float = 120, fork: bool = True, **kwargs) -> subprocess.CompletedProcess:
    """Run the real ``qsite`` command and capture its output as text.

    ``ingest``, ``migrate``, ``status``, ``publish`` and ``serve`` run in a process
    forked from one that has imported qsite already (:mod:`tests.support.forked_qsite`);
    the other commands, and any run with ``fork=False``, as the installed console script.

    ``env`` adds environment variables; a ``QSITE_CONFIG`` of the test runner's
    own environment is dropped unless ``env`` sets one, so only ``--config`` decides.
    """
    full_env = {**os.environ, **(env or {})}
    if "QSITE_CONFIG" not in (env or {}):
        full_env.pop("QSITE_CONFIG", None)
    if fork and forkable(args) and set(kwargs) <= {"cwd"}:
        return run_forked(args, full_env, timeout, **kwargs)
    return subprocess.run([QSITE, *args], capture_output=True, text=True, env=full_env, timeout=timeout, **kwargs)


def free_port() -> int:
    """A loopback port nothing listens on (the OS picked it free a moment ago)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until(predicate, timeout: float, interval: float = 0.05):
    """Call ``predicate()`` until it returns something truthy; returns that, or its last falsy value at ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)  # polls for the event (the predicate)
    return predicate()


def stop(process: subprocess.Popen, signum: int = signal.SIGTERM, timeout: float = 15) -> int:
    """Send ``signum`` and wait; a process that ignores it for ``timeout`` s is killed. Returns the exit code."""
    if process.poll() is None:
        process.send_signal(signum)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    return process.returncode


def stop_group(process: subprocess.Popen, timeout: float = 30) -> None:
    """Stop a process started with ``start_new_session=True`` and everything it started (``make up``'s
    ``qsite up`` and its workers): SIGTERM to the group, SIGKILL after ``timeout`` s."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


class Served:
    """A running ``qsite serve`` (or ``up``): its process, port and log file."""

    def __init__(self, process: subprocess.Popen, port: int, log: Path):
        self.process = process
        self.port = port
        self.log = log
        self.base = f"http://127.0.0.1:{port}"

    def url(self, path: str) -> str:
        return self.base + path


@contextmanager
def qsite_serve(
    config: Path,
    log: Path,
    env: dict | None = None,
    timeout: float = 30,
    *,
    command: str = "serve",
    args: Sequence[str] = (),
    ready: str = "/api/v1",
    wrapper: Sequence[str] = (),
    fork: bool = True,
) -> Iterator[Served]:
    """Start ``qsite serve --config config --port <free port>`` and yield once ``ready`` answers.

    Its stdout and stderr go to ``log``. ``command`` runs another port-taking command
    (``up``), ``args`` adds options, ``env`` adds environment variables; ``ready`` is the
    path polled until any HTTP answer (pick one the rate limit exempts when the budget
    matters). A process the test has not stopped itself gets SIGTERM at the end.

    ``qsite serve`` runs forked (:mod:`tests.support.forked_qsite`) unless ``fork`` is false
    or a ``wrapper`` (such as ``prlimit``) runs it; ``up`` runs as the console script.

    Tests run in parallel (pytest-xdist): when another test's server took the free port
    first, qsite refuses it in one line at once, and the server starts again on another.
    """
    for attempt in range(PORT_ATTEMPTS):
        port = free_port()
        argv = (command, "--config", str(config), "--port", str(port), *args)
        full_env = {**os.environ, **(env or {})}
        if fork and not wrapper and forkable(argv):
            log.write_bytes(b"")
            process = ForkedProcess(argv, full_env, log, log)
        else:
            with open(log, "wb") as out:
                process = subprocess.Popen([*wrapper, QSITE, *argv], stdout=out, stderr=subprocess.STDOUT, env=full_env)
        served = Served(process, port, log)

        def started() -> str | None:
            if process.poll() is not None:
                return "exited"
            return "answers" if answered(served, ready) else None

        try:
            outcome = wait_until(started, timeout, interval=0.1)
        except BaseException:
            stop(process)
            raise
        if outcome == "answers":
            break
        if outcome is None:
            stop(process)
            raise RuntimeError(f"qsite {command} did not answer in {timeout} s: {log.read_text()[-2000:]}")
        if f":{port} is already in use" not in log.read_text() or attempt == PORT_ATTEMPTS - 1:
            raise RuntimeError(f"qsite {command} exited with {process.returncode}: {log.read_text()[-2000:]}")
    try:
        yield served
    finally:
        stop(process)


#: Ports a :func:`qsite_serve` tries before giving up (another test may take a free one first).
PORT_ATTEMPTS = 3


def answered(served: Served, path: str) -> bool:
    """Whether ``served`` gives any HTTP answer at ``path`` now."""
    try:
        httpx.get(served.url(path), timeout=1)
        return True
    except httpx.HTTPError:
        return False


def worker_pids(pid: int) -> list[int]:
    """The child processes of ``pid`` (the workers of a ``qsite serve``), from ``/proc``."""
    children = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        children += [int(child) for child in (task / "children").read_text().split()]
    return children


def _cpu_ticks(pid: int) -> dict[str, int]:
    ticks = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        ticks[task.name] = int(fields[11]) + int(fields[12])  # utime + stime (proc(5) fields 14 and 15)
    return ticks


def threads_on_cpu(pid: int, interval: float = 0.2) -> int:
    """How many threads of ``pid`` used the CPU during the next ``interval`` seconds (from ``/proc``).

    The event a test waits for when work it started runs in a server's threads,
    with nothing else to show for it (a SQL query counting for ever). The sleep
    is the measuring window, not a guess at how long something takes.
    """
    before = _cpu_ticks(pid)
    time.sleep(interval)  # review: the measuring window (see above), not a wait
    after = _cpu_ticks(pid)
    return sum(1 for tid, ticks in after.items() if ticks > before.get(tid, ticks))


def cpu_seconds(pid: int) -> float:
    """CPU time ``pid`` has used so far (its own, all threads), or 0.0 once it is gone; from ``/proc``."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
