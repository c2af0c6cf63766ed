"""The processes a ``make bench`` run starts, and what it reads of them.

:class:`Processes` starts them (each in its own session, with its own log) and
stops all of them, and only them, at the end; :func:`news_config` writes a qsite
config; :func:`start_qsite` runs ``qsite serve`` on a free port, pinned to a
core; :func:`memory_kb` reads a process tree's resident memory,
:class:`PeakMemory` samples it less a file's map,
:func:`wait_idle` waits until it stops using the CPU, and
:func:`hold_resident` keeps a database file in the page cache.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import yaml
from datasette.app import Datasette

from bench.cpu import cpu_seconds, process_tree
from bench.servers import pinned, raw_server_command
from qsite.service.datasette.state import cursor_key

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
#: Where the bench's ``qsite`` commands come from: ``make install``'s environment, the one ``make up``
#: serves from (the runtime packages alone), not the tests' (``.venv-test``), whose Datasette plugins
#: for the good-neighbour tests (``datasette-auth-tokens`` among them) run hooks on every request:
#: 15% fewer uncached items a second measured side by side (docs/performance.md). ``make bench``
#: syncs it; without it, the tests' environment, and the results say which (:func:`qsite_environment`).
SERVE_BIN = ROOT / ".venv" / "bin" if (ROOT / ".venv" / "bin" / "qsite").exists() else BIN
SAMPLE_EXPORT = ROOT / "pipeline" / "samples" / "site-export.json"

#: wrk is one client sending thousands of requests a second: the fair-use limiter
#: runs on every request (its cost is part of what is measured) but never trips.
BENCH_RATE_LIMIT = "100000000/second"
#: The news page of the cached benchmark, and the one each raw ceiling replays.
NEWS = "/api/v1/news?tag=Science&limit=30"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Processes:
    """The processes this run started; all of them, and only them, are stopped at the end."""

    def __init__(self):
        self.started: list[subprocess.Popen] = []

    def start(self, args: list[str], log_path: Path, **kwargs) -> subprocess.Popen:
        handle = open(log_path, "wb")
        process = subprocess.Popen(args, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True, **kwargs)
        process.log_path = log_path
        self.started.append(process)
        return process

    def stop(self, process: subprocess.Popen) -> None:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()

    def stop_all(self) -> None:
        for process in reversed(self.started):
            self.stop(process)


def wait_http(url: str, process: subprocess.Popen, timeout: float = 60.0) -> float:
    """Wait until ``url`` answers at all; return how long it took."""
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if process.poll() is not None:
            raise SystemExit(f"bench: server exited with {process.returncode}; see {process.log_path}")
        try:
            httpx.get(url, timeout=2)
            return time.perf_counter() - started
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit(f"bench: {url} did not answer within {timeout:g} s; see {process.log_path}")


def start_raw(procs: Processes, server: str, core: int | None, responses: Path, log_path: Path) -> subprocess.Popen:
    """The raw ASGI app (:mod:`bench.raw_asgi`) under ``server``, pinned to ``core``, replaying ``responses``.

    Returned once it answers :data:`NEWS`, with its address as ``.base``.
    """
    port = free_port()
    process = procs.start(pinned(core, raw_server_command(server, port)), log_path, cwd=ROOT,
                          env={**os.environ, "BENCH_RAW_RESPONSES": str(responses)})
    process.base = f"http://127.0.0.1:{port}"
    wait_http(process.base + NEWS, process)
    return process


def memory_kb(pid: int) -> dict:
    """``VmHWM`` (peak resident), ``VmRSS`` and ``VmLck`` (locked) of ``pid`` and its children, in kB, per process."""
    result = {}
    for current in process_tree(pid):
        try:
            status = Path(f"/proc/{current}/status").read_text()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        result[current] = {
            "name": fields.get("Name", "").strip(),
            "hwm_kb": int(fields.get("VmHWM", "0 kB").split()[0]),
            "rss_kb": int(fields.get("VmRSS", "0 kB").split()[0]),
            "locked_kb": int(fields.get("VmLck", "0 kB").split()[0]),
        }
    return result


def resident_kb(pid: int, path: Path) -> tuple[int, int]:
    """Resident kB of ``pid`` in all, and of its maps of the file ``path``, from one read of ``/proc/PID/smaps``.

    From one read, not ``VmRSS`` and then ``smaps``: SQLite maps its file again when a connection
    is replaced, and a map gone between two reads counted as the process's own (1,699 MB for 134 in
    a run on 2026-11-29). ``(0, 0)`` when the process is gone.
    """
    target, total, mapped, inside = str(Path(path).resolve()), 0, 0, False
    try:
        lines = Path(f"/proc/{pid}/smaps").read_text().splitlines()
    except OSError:
        return 0, 0
    for line in lines:
        fields = line.split(None, 5)
        if "-" in fields[0] and len(fields) >= 5:  # a map's header: address range, perms, offset, device, inode, path
            inside = len(fields) == 6 and fields[5] == target
        elif fields[0] == "Rss:":
            total += int(fields[1])
            if inside:
                mapped += int(fields[1])
    return total, mapped


def mapped_file_kb(pid: int, path: Path) -> int:
    """Resident kB of ``pid``'s maps of the file ``path`` (``/proc/PID/smaps``): pages of the system's page cache, shared."""
    return resident_kb(pid, path)[1]


class PeakMemory:
    """The most each process of a tree held resident, less its maps of ``path``, sampled every ``every`` seconds.

    A served API maps its database (``api.mmap_size``): the pages it touched count in its RSS
    (``VmHWM`` too), up to the file's size, though they are the page cache the file's reads use
    mapped or not (the bench holds them resident either way). What the process itself holds is
    its RSS less them. A sample every half second misses a spike shorter than that; ``VmHWM``
    (:func:`memory_kb`) stays beside it, the map included.
    """

    def __init__(self, pid: int, path: Path, every: float = 0.5):
        self.pid, self.path, self.every = pid, path, every
        self.peak_kb: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="peak-memory", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while True:
            for pid in process_tree(self.pid):
                total, mapped = resident_kb(pid, self.path)
                self.peak_kb[pid] = max(self.peak_kb.get(pid, 0), total - mapped)
            if self._stop.wait(self.every):
                return

    def stop(self) -> dict[int, int]:
        """Sampling ends (one last sample first); the peak of each process, kB."""
        self._stop.set()
        self._thread.join()
        return dict(self.peak_kb)


def disk_read_bytes(pid: int | str = "self") -> int:
    """What ``pid`` has read from the storage device so far (``read_bytes`` of ``/proc/PID/io``): not page-cache hits."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("read_bytes:"):
            return int(line.split()[1])
    return 0


def hold_resident(procs: Processes, path: Path, log_path: Path, timeout: float = 120.0) -> tuple[dict, subprocess.Popen | None]:
    """Keep ``path`` in the page cache while the run needs it, read from the file: ``vmtouch -e``, then
    ``vmtouch -l``, its pages read again and locked (``mlock``).

    Why locked: the VMs this bench runs on drop file pages on their own, whatever memory is free
    (2026-11-27: 143 MB of a 1.9 GB database in 60 s with 18 GB free, no reclaim counted in
    ``/proc/vmstat``; 2026-11-29: a DAMON ``pageout`` scheme, ``/sys/kernel/mm/damon/admin``, pages out
    what was not touched for a while), so a first read of a page was a read from the disk, now and
    then, at a random point of a run, and the SQL guard's p99 timed this VM's disk (bench/README.md).
    A machine with memory to spare keeps a file it serves from in its cache; this makes the bench's
    machine do so. vmtouch is a well-kept tool for exactly that; the server's own memory is untouched
    (the pages are locked by vmtouch's process).

    Why dropped first: pages the bench's build or a migration wrote stay in the cache as the writes
    made them, 4 KiB apiece, where pages read from the file come in large folios (2 MiB on Linux 6.18
    with ext4), which a new process maps with far fewer page faults. The SQL timings run in new
    processes: on a database just migrated, counts of a rare word and a common one took 5.8 ms against
    3.0 ms once it was read again (bench/README.md, 2026-11-29). Dropped and read, every run times the
    database as a server reads it after a restart, whatever wrote it last. The file's cached pages are
    read again from the disk once (seconds), so point the bench at a copy, not at a database in use.
    Returned: what was held (``{"held_mb": ..., "seconds": ...}``) and vmtouch's process, to stop when
    done; or ``{"held_mb": 0, "why": ...}`` and None when it cannot (vmtouch missing, or no right to lock
    that much: ``ulimit -l``), and the run goes on without.
    """
    vmtouch = shutil.which("vmtouch")
    if vmtouch is None:
        return {"held_mb": 0, "why": "vmtouch is not installed (bench/run.sh installs it)"}, None
    size_kb = -(-path.stat().st_size // 4096) * 4
    subprocess.run([vmtouch, "-q", "-e", str(path)], check=False, capture_output=True)  # pages another process locks stay
    process = procs.start([vmtouch, "-l", "-m", f"{size_kb + 1024}K", str(path)], log_path)
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        locked_kb = memory_kb(process.pid).get(process.pid, {}).get("locked_kb", 0)
        if process.poll() is not None:
            return {"held_mb": 0, "why": f"vmtouch exited with {process.returncode}: {log_path.read_text().strip()[:300]}"}, None
        if locked_kb >= size_kb:
            return {"held_mb": round(locked_kb / 1024, 1), "seconds": round(time.perf_counter() - started, 1)}, process
        time.sleep(0.2)
    procs.stop(process)
    return {"held_mb": 0, "why": f"vmtouch had not locked {path} within {timeout:g} s"}, None


def wait_idle(pid: int, timeout: float = 120.0, busy: float = 0.05) -> float:
    """Wait until ``pid`` (and children) use under ``busy`` of a core; return how long that took.

    A server keeps working on requests a load generator sent before it stopped
    (Datasette does not cancel a query when its client leaves); the next
    target must not share the core with that work.
    """
    started = time.perf_counter()
    last = cpu_seconds(pid)
    while time.perf_counter() - started < timeout:
        time.sleep(0.5)
        now = cpu_seconds(pid)
        if now - last < busy * 0.5:
            break
        last = now
    return time.perf_counter() - started


def news_config(path: Path, db: Path, sources: list[dict], rate_limit: str = BENCH_RATE_LIMIT) -> Path:
    """A qsite config listing ``sources`` (name, url, tag), with a classification rule like a real one."""
    data = {
        "database": str(db),
        "site_export": {"source": str(SAMPLE_EXPORT), "every": "1h"},
        "news": {
            "every": "15m",
            "retention_days": None,
            "sources": [
                {
                    "name": s["name"],
                    "url": s["url"],
                    "tag": s["tag"],
                    # Matches the two money headlines of bench/feeds.py (about one item in six).
                    "rules": [{"match": r"(?i)\b(raises|ipo)\b", "tag": "Investing"}],
                }
                for s in sources
            ],
        },
        "api": {"cache_max_age": 300, "rate_limit": rate_limit},
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def qsite_environment() -> str:
    """The environment the bench's ``qsite`` commands run from, for the results (see :data:`SERVE_BIN`)."""
    return str(SERVE_BIN.parent.relative_to(ROOT)) if SERVE_BIN.parent.is_relative_to(ROOT) else str(SERVE_BIN.parent)


def qsite(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([str(SERVE_BIN / "qsite"), *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bench: qsite {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return done


#: Datasette's secret for every ``qsite serve`` of the bench: the cursors of its request lists carry counts
#: sealed with it, as the servers' own next links would (service/api/cursors.py).
BENCH_SECRET = "qsite-bench"


def bench_cursor_key() -> bytes:
    """The key the bench's servers seal the counts in their cursors with (:data:`BENCH_SECRET`)."""
    return cursor_key(Datasette(memory=True, secret=BENCH_SECRET))


def start_qsite(args, procs: Processes, work: Path, name: str, config: Path, workers: int, core: int | None):
    """``qsite serve --workers N`` on a free port, pinned to ``core``; returns (process, base URL)."""
    port = free_port()
    process = procs.start(
        pinned(core, [str(SERVE_BIN / "qsite"), "serve", "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
                      "--workers", str(workers)]),
        work / f"serve-{name}.log",
        cwd=ROOT,
        # the secret the request lists' cursors were sealed with (bench/uncached.py CarriedCounts)
        env={**os.environ, "DATASETTE_SECRET": BENCH_SECRET},
    )
    base = f"http://127.0.0.1:{port}"
    return process, base, wait_http(base + "/api/v1/stats", process)
