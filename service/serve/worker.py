"""What each granian worker runs after the fork: its app, then its settling once started.

Promises: :func:`load_app` builds one worker's ASGI app (its own Datasette, the follower of
a ``--follow`` replica, :mod:`qsite.service.metrics` outermost, the descriptor watch);
:func:`after_startup` freezes what startup made (:func:`gc.freeze`) once the lifespan's
startup is complete, and at the first request sets every thread but the event loop's to
``SCHED_BATCH`` (:func:`batch_other_threads`). Neither changes what any request answers:
only when the interpreter and the CPU turn to the event loop.

Must not change: the event loop's own thread keeps the default policy; where Linux's
``SCHED_BATCH`` or ``/proc`` is missing, nothing changes. What these settings were measured
to gain is in ``docs/performance.md`` ("SCHED_BATCH", "gc.freeze").
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import sys
import threading
from pathlib import Path

from qsite.config import Config
from qsite.service.datasette.state import instance
from qsite.service.metrics.middleware import observed
from qsite.service.serve.app import make_datasette
from qsite.service.serve.descriptors import FD_CHECK_EVERY, FdWatch

log = logging.getLogger("qsite.serve")

#: Seconds a thread runs Python before it hands the interpreter to another that waits for it.
SWITCH_INTERVAL = 0.001


def load_app(target: tuple[Config, Path | None]):
    """Granian's target loader, called once in each worker process after the fork, with its event loop set.

    ``target`` is ``(config, follow)``: with a ``follow`` folder, the worker serves the published
    snapshots (:mod:`qsite.service.replica.follow`), each worker following on its own into the shared folder;
    locks on the files let the workers download each snapshot once and delete a file only when no
    worker serves it.
    """
    config, follow = target
    datasette = make_datasette(config, files=None if follow is None else [])
    app = datasette.app()
    if follow is not None:
        from qsite.service.replica.follow import Follower

        follower = instance(datasette).follower = Follower(datasette, config, follow)
        app = follower.wrap(app)
    app = observed(app, datasette, config)
    FdWatch(resource.getrlimit(resource.RLIMIT_NOFILE)[0]).every(FD_CHECK_EVERY, asyncio.get_event_loop())
    # The thread making Datasette's pages (service/http/page_loop.py) hands the interpreter back to the
    # event loop within a millisecond (5 by default): an /api/v1 request waits at most that long for it.
    sys.setswitchinterval(SWITCH_INTERVAL)
    return after_startup(app)


def after_startup(app):
    """``app`` settling the worker once it has started, before it answers its first request.

    Two things, each once:

    - :func:`gc.freeze`, when the ASGI lifespan's startup is complete: what startup made
      (modules, Datasette, the API's documents in every language) lives as long as the
      worker, so full collections need not walk it again, a pause every queued request waits through;
    - :func:`batch_other_threads`, when the first request comes: granian
      starts its runtime's threads after the lifespan's startup.
    """
    threads_batched = False

    def settled(scope, receive, send):
        # Not a coroutine: a request gets the app's own awaitable (as granian's own wrappers hand
        # theirs on), so that this layer adds no frame to every request for what it does once.
        nonlocal threads_batched
        if scope["type"] != "lifespan":
            if not threads_batched:
                threads_batched = True
                batched = batch_other_threads()
                log.debug("%d thread(s) of the worker besides the event loop's set to SCHED_BATCH", len(batched))
            return app(scope, receive, send)
        return app(scope, receive, frozen_at_startup(send))

    return settled


def frozen_at_startup(send):
    """``send`` that collects and freezes the garbage collector's objects when the lifespan's startup completes."""

    async def sending(message):
        if message["type"] == "lifespan.startup.complete":
            gc.collect()  # what startup left as garbage goes first, not into the frozen set
            gc.freeze()
        await send(message)

    return sending


def batch_other_threads() -> list[int]:
    """Set every thread of the worker but the calling one (the event loop's) to ``SCHED_BATCH``; their ids.

    A worker runs its Python (each request's routing, SQL and JSON) on the event loop's
    thread and granian's runtime (the sockets, in Rust) on others. Under Linux's default
    policy every wake-up of the runtime preempted the event loop there and then; a thread
    in ``SCHED_BATCH`` never preempts on waking: the runtime runs when the loop waits or its
    time slice ends, and then handles the I/O of several requests at once. Nothing is lost
    or reordered, only run later by at most a slice.

    Every other thread, not only the runtime's: Python code runs on granian's threads too,
    so Python's list of threads does not tell them apart. Threads begun later by the loop's
    thread inherit its default policy. Where there is no ``SCHED_BATCH`` or no ``/proc``
    (not Linux), nothing changes. What it gains: ``docs/performance.md``.
    """
    if not hasattr(os, "SCHED_BATCH"):
        return []
    event_loop = threading.get_native_id()
    try:
        thread_ids = [int(name) for name in os.listdir("/proc/self/task")]
    except OSError:
        return []
    batched = []
    for thread_id in thread_ids:
        if thread_id == event_loop:
            continue
        try:
            os.sched_setscheduler(thread_id, os.SCHED_BATCH, os.sched_param(0))
        except OSError:  # ended meanwhile, or a sandbox that refuses it: the default policy stays
            continue
        batched.append(thread_id)
    return batched
