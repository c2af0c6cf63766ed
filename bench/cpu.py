"""Where the CPU went during one load run: the server's process tree, wrk, the machine's other work, idle.

``make bench`` runs on a small machine (2 cores) that wrk shares with the
server and that other work shares with both. A req/s figure alone cannot say
whether a server was short of CPU or waiting on something else; these figures,
taken around each wrk run of the workers comparison, can: with two workers
and no idle core left, a second worker has nothing more to run on.
"""

from __future__ import annotations

import os
import resource
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def process_tree(pid: int) -> list[int]:
    """``pid`` and all its descendants (granian's supervisor and its workers)."""
    pids, queue = [], [pid]
    while queue:
        current = queue.pop()
        pids.append(current)
        for task in Path(f"/proc/{current}/task").glob("*"):
            try:
                queue += [int(child) for child in (task / "children").read_text().split()]
            except OSError:
                pass
    return pids


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of ``pid`` and its children so far (all their threads)."""
    total = 0.0
    for current in process_tree(pid):
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def machine_ticks() -> tuple[int, int, int]:
    """(all ticks, idle ticks, cores) of the whole machine so far, from ``/proc/stat``."""
    lines = Path("/proc/stat").read_text().splitlines()
    fields = [int(x) for x in lines[0].split()[1:9]]  # user nice system idle iowait irq softirq steal
    cores = sum(1 for line in lines[1:] if line.startswith("cpu"))
    return sum(fields), fields[3] + fields[4], cores


def children_cpu() -> float:
    """CPU seconds of this process's finished children (wrk, once it has exited)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class CpuMeter:
    """Started just before a wrk run, read just after it: the cores each party used meanwhile."""

    def __init__(self, server_pid: int):
        self.server_pid = server_pid
        self.server = cpu_seconds(server_pid)
        self.children = children_cpu()
        self.ticks = machine_ticks()
        self.started = time.perf_counter()

    def read(self, requests: int) -> dict:
        """Cores used by the server, by wrk, by everything else, and left idle; CPU microseconds per request."""
        wall = time.perf_counter() - self.started
        server = cpu_seconds(self.server_pid) - self.server
        wrk = children_cpu() - self.children
        now = machine_ticks()
        total, idle, cores = now[0] - self.ticks[0], now[1] - self.ticks[1], self.ticks[2]
        busy = cores * (1 - idle / total) if total else 0.0
        return {
            "cores": cores,
            "server_cores": server / wall,
            "wrk_cores": wrk / wall,
            "other_cores": max(0.0, busy - (server + wrk) / wall),
            "idle_cores": cores - busy,
            "server_us_per_request": server / requests * 1e6 if requests else None,
            "wrk_us_per_request": wrk / requests * 1e6 if requests else None,
        }
