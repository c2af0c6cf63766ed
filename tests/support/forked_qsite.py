"""``qsite`` commands in processes forked from one that imported qsite once.

A ``qsite ingest`` spends about 0.4 s of CPU importing (config, httpx, feedparser,
lxml, sqlite-utils) before it reads a byte, and a ``qsite serve`` 0.75 s (Datasette,
granian); the suite starts about 90 of the one and 40 of the other, which on 2
cores was a quarter of ``make test``. Python's ``multiprocessing`` forkserver
keeps one process per test worker with those modules imported
(``set_forkserver_preload``) and forks it for each run. Each run is still a
process of its own: its own environment, working folder, stdout and stderr, pid,
signals and exit status; the code run is the console script's, ``qsite.cli:cli``.

The installed console script (:data:`tests.support.processes.QSITE`) still runs
``qsite up`` and ``schedule``, a serve under a wrapper (``prlimit``), the tests of
the script itself (``test_cli.py``) and any run asked with ``fork=False``. As with
any start method of ``multiprocessing`` but fork, a script (not pytest) that uses
these runs its ``__main__`` again in each child: guard it with ``if __name__ == "__main__"``.
"""

from __future__ import annotations

import functools
import multiprocessing
import os
import subprocess
import tempfile
from pathlib import Path

import click

#: The commands that run forked (the first argument that is not an option): they end by
#: themselves, or serve until signalled, without starting other ``qsite`` commands.
FORKED_COMMANDS = frozenset({"ingest", "migrate", "status", "publish", "serve"})
#: What the forkserver imports once: what those commands import.
PRELOAD = ["qsite.cli", "qsite.pipeline.ops.ingest", "qsite.pipeline.ops.publish", "qsite.pipeline.ops.status", "qsite.service.serve.runner"]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)


@functools.cache
def _options_taking_a_value() -> frozenset[str]:
    """The ``qsite`` group's options that take a value (``--config``), as its click parameters say."""
    from qsite.cli import cli

    return frozenset(opt for param in cli.params if isinstance(param, click.Option) and not param.is_flag for opt in param.opts)


def forkable(args: tuple[str, ...]) -> bool:
    """Whether ``qsite *args`` is a command that runs forked."""
    words = iter(args)
    for word in words:
        if word in _options_taking_a_value():
            next(words, None)
        elif not word.startswith("-"):
            return word in FORKED_COMMANDS
    return False


def _main(args: list[str], env: dict[str, str], cwd: str | None, stdout: str, stderr: str) -> None:
    """The forked child: the environment, folder and standard streams of a new process, then the CLI.

    ``stdout`` and ``stderr`` are files; the same path for both shares one
    offset, as ``stderr=subprocess.STDOUT`` does.
    """
    os.environ.clear()
    os.environ.update(env)
    if cwd is not None:
        os.chdir(cwd)
    opened = {path: os.open(path, os.O_WRONLY | os.O_APPEND) for path in {stdout, stderr}}
    os.dup2(opened[stdout], 1)
    os.dup2(opened[stderr], 2)
    for fd in opened.values():
        os.close(fd)
    from qsite.cli import cli

    cli.main(args, prog_name="qsite")  # ends with SystemExit: its code is the process's exit status


class ForkedProcess:
    """A forked ``qsite`` run, with what the tests use of :class:`subprocess.Popen`."""

    def __init__(self, args: tuple[str, ...], env: dict[str, str], stdout: Path, stderr: Path, cwd: str | os.PathLike | None = None):
        self.args = ["qsite", *args]
        self._process = _context.Process(target=_main, args=(list(args), env, None if cwd is None else str(cwd), str(stdout), str(stderr)))
        self._process.start()
        self.pid = self._process.pid

    @property
    def returncode(self) -> int | None:
        return self._process.exitcode

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        self._process.join(timeout)
        if self._process.exitcode is None:
            raise subprocess.TimeoutExpired(self.args, timeout)
        return self._process.exitcode

    def send_signal(self, signum: int) -> None:
        if self._process.exitcode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self._process.kill()


def run_forked(args: tuple[str, ...], env: dict[str, str], timeout: float, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """``qsite *args`` forked, to its end; the same answer as ``subprocess.run(..., capture_output=True, text=True)``."""
    with tempfile.TemporaryDirectory(prefix="qsite-run-") as folder:
        stdout, stderr = Path(folder, "stdout"), Path(folder, "stderr")
        stdout.touch()
        stderr.touch()
        process = ForkedProcess(args, env, stdout, stderr, cwd)
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise subprocess.TimeoutExpired(process.args, timeout, stdout.read_text(), stderr.read_text()) from None
        return subprocess.CompletedProcess(process.args, process.returncode, stdout.read_text(), stderr.read_text())
