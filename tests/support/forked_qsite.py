"""The short ``qsite`` commands, each in a process of its own forked from one that imported qsite once.

A ``qsite ingest`` spends about 0.4 s of CPU importing (config, httpx, feedparser,
lxml, sqlite-utils) before it reads a byte, and the suite runs about 130 of the
short commands: on 2 cores that was a sixth of ``make test``. Python's
``multiprocessing`` forkserver keeps one process per test worker with those
modules imported (``set_forkserver_preload``) and forks it for each run. Each
run is still its own process: its own environment, working folder, stdout and
stderr (files, as ``subprocess.run(capture_output=True)`` gives pipes), and exit
status; the code run is the console script's, ``qsite.cli:cli``.

Only commands that end by themselves go this way (:data:`FORKED_COMMANDS`).
``qsite serve``, ``up`` and ``schedule`` start servers and answer signals, so
they run as the installed console script (:data:`tests.support.processes.QSITE`),
as do the tests of the console script itself (``test_cli.py``).
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import tempfile
from pathlib import Path

#: The commands a fork runs (the first argument that is not an option).
FORKED_COMMANDS = frozenset({"ingest", "migrate", "status", "publish"})
#: What the forkserver imports once: what those commands import.
PRELOAD = ["qsite.cli", "pipeline.ops.ingest", "pipeline.ops.publish", "pipeline.ops.status"]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(PRELOAD)


#: The options given before the command's name that take a value (qsite/options.py global_options).
_GLOBAL_OPTIONS = frozenset({"--config", "--db", "--log-level"})


def forkable(args: tuple[str, ...]) -> bool:
    """Whether ``qsite *args`` is a command :func:`run_forked` runs."""
    words = iter(args)
    for word in words:
        if word in _GLOBAL_OPTIONS:
            next(words, None)
        elif not word.startswith("-"):
            return word in FORKED_COMMANDS
    return False


def _main(args: list[str], env: dict[str, str], cwd: str | None, stdout: str, stderr: str) -> None:
    """The forked child: the environment, folder and standard streams of a new process, then the CLI."""
    os.environ.clear()
    os.environ.update(env)
    if cwd is not None:
        os.chdir(cwd)
    for fd, path in ((1, stdout), (2, stderr)):
        target = os.open(path, os.O_WRONLY)
        os.dup2(target, fd)
        os.close(target)
    from qsite.cli import cli

    cli.main(args, prog_name="qsite")  # ends with SystemExit: its code is the process's exit status


def run_forked(args: tuple[str, ...], env: dict[str, str], timeout: float, cwd: str | os.PathLike | None = None) -> subprocess.CompletedProcess:
    """``qsite *args`` in a forked process; the same answer as ``subprocess.run(..., capture_output=True, text=True)``."""
    with tempfile.TemporaryDirectory(prefix="qsite-run-") as folder:
        stdout, stderr = Path(folder, "stdout"), Path(folder, "stderr")
        stdout.touch()
        stderr.touch()
        process = _context.Process(target=_main, args=(list(args), env, None if cwd is None else str(cwd), str(stdout), str(stderr)))
        process.start()
        process.join(timeout)
        if process.exitcode is None:
            process.kill()
            process.join()
            raise subprocess.TimeoutExpired(["qsite", *args], timeout, stdout.read_text(), stderr.read_text())
        return subprocess.CompletedProcess(["qsite", *args], process.exitcode, stdout.read_text(), stderr.read_text())
