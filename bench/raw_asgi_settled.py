"""The raw ASGI app (:mod:`bench.raw_asgi`) as ``qsite serve`` runs its own: the ``granian-batched`` ceiling.

:func:`qsite.service.serve.worker.after_startup` wraps it: from its first request the
worker's other threads, granian's runtime, are in ``SCHED_BATCH``. On one
core that alone made the raw app half as fast again, so ``make bench``
measures the ceiling both ways. A module of its own: importing qsite's
serving code (Datasette with it) into :mod:`bench.raw_asgi` took the plain
ceiling's memory from 30 to 81 MB.
"""

from __future__ import annotations

from bench.raw_asgi import app
from qsite.service.serve.worker import after_startup

settled_app = after_startup(app)
