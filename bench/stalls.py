"""Is a server as fast after being stopped now and then as before? Stalls during the uncached walk.

A shared machine stops a process now and then (a busy neighbour, a cold file,
a profiler). A read then runs past the inline budget (20 ms) and is
interrupted. On Python 3.11, each interrupted statement used to be compiled
again on every later read, for as long as its connection lived. One worker at a
million items fell from 1,900 to 600 uncached requests a second, for good
(``service/api/reader.py`` now replaces such a connection). Nothing else in
the bench stops the server, so nothing else would see a slowdown that
outlives its cause. This walks the uncached pages once, stops every process of
the server :data:`STOPS` times for :data:`STOP_S` while walking again, then
walks a third time. The rate after the stalls, as a ratio of the rate before,
is measured side by side in one run.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable

from bench.cpu import process_tree

#: How many times the server is stopped, for how long each time, and how long it runs in between (seconds).
STOPS = 20
STOP_S = 0.05
RUN_S = 0.1


def stop_now_and_then(pid: int, stops: int = STOPS, stop_s: float = STOP_S, run_s: float = RUN_S) -> None:
    """Stop ``pid`` and its descendants ``stops`` times for ``stop_s`` each, as a stalled machine would."""
    for _ in range(stops):
        pids = process_tree(pid)
        for each in pids:
            os.kill(each, signal.SIGSTOP)
        time.sleep(stop_s)
        for each in pids:
            os.kill(each, signal.SIGCONT)
        time.sleep(run_s)


def rate_after_stalls(walk: Callable[[float], dict], pid: int, seconds: float) -> dict:
    """Walk for ``seconds``, walk again while ``pid`` is stopped now and then, and walk once more.

    :param walk: runs the load for some seconds and returns its wrk result (``rps``, ``p99_ms``).
    """
    before = walk(seconds)
    stalling = threading.Thread(target=stop_now_and_then, args=(pid,))
    stalling.start()
    during = walk(max(seconds, STOPS * (STOP_S + RUN_S) + 1))
    stalling.join()
    after = walk(seconds)
    return {
        "stops": STOPS,
        "stop_s": STOP_S,
        "rps": {"before": before["rps"], "during": during["rps"], "after": after["rps"]},
        "p99_ms": {"before": before["p99_ms"], "during": during["p99_ms"], "after": after["p99_ms"]},
        "after_vs_before": after["rps"] / before["rps"],
    }
