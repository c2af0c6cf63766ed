"""Running :func:`qsite.pipeline.news.feeds.read_feed` in this process or in a pebble process pool, under a deadline.

Parsing is CPU-bound, so a run with many changed feeds parses them in a pool
of worker processes; and one big body, which a hostile publisher can make
very slow to parse, goes to a worker even in a small run, so that its parse
has a deadline: a worker that runs past it is killed (and replaced) by
pebble, and a worker that dies fails only the feed it was parsing. A worker's
memory is bounded too (:data:`PARSE_MEMORY`): a parse that needs more fails
its feed with a ``MemoryError`` instead of taking the machine's memory.
"""

from __future__ import annotations

import asyncio
import os
import resource
from multiprocessing import get_context

from pebble import ProcessExpired, ProcessPool

from qsite.pipeline.news.feeds import FeedJob, FeedResult, prepare, read_feed

#: Fewer changed feeds than this are parsed in this process: a pool costs more than it saves.
POOL_MIN_FEEDS = 8
#: Seconds one feed's parse may take in a pool worker before the worker is killed and the source
#: failed. A normal feed parses at about 1.7 s per MiB, so only a hostile one (e.g. deep unclosed
#: nesting, about 6 s per MiB) gets near it within the fetcher's byte cap.
PARSE_DEADLINE = 30.0
#: Bytes of address space a pool worker may take beyond what it inherits at fork, before a
#: parse fails with MemoryError. A hostile feed (one item, then millions of unclosed ``<a>``)
#: takes about 125 MiB per MiB of body: 1.8 GB for 14 MB, all within its deadline.
PARSE_MEMORY = 1024 * 1024 * 1024
#: Bodies this big or bigger are parsed in a pool worker, under :data:`PARSE_DEADLINE`, even in a
#: small run: a one-off pool costs 50-100 ms, under a tenth of a normal parse at this size, and a
#: smaller body cannot hold up the run for long (about 3 s for the worst document known).
IN_PROCESS_MAX_BYTES = 512 * 1024


class ParsePool:
    """Parses feed bodies in this process, or in a pool started on first need.

    :param workers: processes to parse in; ``None`` picks by the amount of work
        (``due`` feeds), 0 parses in-process every body under :data:`IN_PROCESS_MAX_BYTES`
        (bigger ones go to a one-worker pool).
    :param deadline: seconds a pooled parse may take before its feed fails.
    :param memory: bytes of address space a pool worker may add to what it inherits (:data:`PARSE_MEMORY`).
    """

    def __init__(self, workers: int | None, due: int, deadline: float = PARSE_DEADLINE, memory: int = PARSE_MEMORY):
        if workers is None:
            cores = os.cpu_count() or 1
            workers = min(cores, 4) if cores > 1 and due >= POOL_MIN_FEEDS else 0
        self.workers = workers
        self.deadline = deadline
        self.memory = memory
        self.pool: ProcessPool | None = None

    async def read(self, job: FeedJob) -> FeedResult:
        """The feed's items, or a :class:`FeedResult` whose ``error`` says why there are none; never raises."""
        try:
            return await self._read(job)
        except Exception as exc:  # whatever else a parse raised fails this feed only
            return FeedResult(error=f"parser failed: {type(exc).__name__}: {exc}")

    async def _read(self, job: FeedJob) -> FeedResult:
        if not self.workers and len(job.body) < IN_PROCESS_MAX_BYTES:
            return read_feed(job)
        if self.pool is None:
            # fork: the workers inherit the imported parser (and its loaded rules) instead of loading them again.
            prepare()
            self.pool = ProcessPool(self.workers or 1, initializer=_limit_memory, initargs=(self.memory,), context=get_context("fork"))
        future = self.pool.schedule(_read_in_worker, (job,), timeout=self.deadline)
        try:
            return await asyncio.wrap_future(future)
        except TimeoutError:  # pebble's clock starts when a worker takes the job, not while it queues
            return FeedResult(error=f"parsing took longer than {self.deadline:g} s; the feed is too large or malformed")
        except ProcessExpired as exc:  # past its memory (below), or e.g. the kernel's out-of-memory killer
            if exc.exitcode == MEMORY_EXIT:
                return FeedResult(error=f"parsing needed more than {self.memory // 2**20} MiB of memory; the feed is too large or malformed")
            how = f"killed by signal {-exc.exitcode}" if exc.exitcode < 0 else f"exit code {exc.exitcode}"
            return FeedResult(error=f"the parser process died ({how}); the feed may be too large or malformed")

    def close(self) -> None:
        """Stop the pool, if one was started: no worker outlives the run."""
        if self.pool is not None:
            self.pool.stop()
            self.pool.join()
            self.pool = None

    def __enter__(self) -> ParsePool:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


#: A pool worker's exit status when its parse ran out of memory (:func:`_read_in_worker`).
MEMORY_EXIT = 86


def _read_in_worker(job: FeedJob) -> FeedResult:
    """:func:`read_feed` in a pool worker, which leaves at once with :data:`MEMORY_EXIT` when the parse runs
    out of memory: sending the ``MemoryError`` back would need memory too, and a worker that fails to
    send it dies with a status that no longer says why."""
    try:
        return read_feed(job)
    except MemoryError:
        os._exit(MEMORY_EXIT)


def _limit_memory(budget: int) -> None:
    """A pool worker's initializer: allow its address space to grow by ``budget`` bytes, no more.

    RLIMIT_AS is the one limit Linux enforces on a process's memory (RLIMIT_RSS is ignored);
    it counts address space, so the bound is what the forked worker already maps (the parent's
    modules, thread stacks, malloc arenas) plus the budget, or the hard limit if lower.
    """
    try:
        with open("/proc/self/statm") as statm:  # Linux's; elsewhere no limit, as before
            mapped = int(statm.read().split()[0]) * resource.getpagesize()
        hard = resource.getrlimit(resource.RLIMIT_AS)[1]
        limit = mapped + budget if hard == resource.RLIM_INFINITY else min(mapped + budget, hard)
        resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (OSError, ValueError):
        # A limit that cannot be set is no limit, never a worker that dies at start: pebble
        # would fail every pooled parse ("All workers expired") on macOS, where setrlimit can refuse.
        pass
