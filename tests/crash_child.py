"""A single-threaded zygote for ``test_crash.py``: forks ingesting children on demand.

Started once with config paths as arguments, it imports the pipeline once and
then, for each line read on stdin, forks a child that ingests for ever (the
site export under each config in turn, then the news feeds, all under the
writer lock, exactly as ``qsite ingest all`` does) and prints the child's pid.
The test SIGKILLs that pid at a random moment. Forking from a process with no
other threads is safe, and makes each child start in microseconds instead of
the ~0.7 s a fresh interpreter spends importing, so the kills land in real
work rather than in start-up.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import sys

from qsite.config import load_config
from qsite.pipeline.store.lock import writer_lock
from qsite.pipeline.news.ingest import ingest_news
from qsite.pipeline.site.ingest import ingest_site
from qsite.pipeline.store import open_database


def ingest_for_ever(configs) -> None:
    for config in itertools.cycle(configs):
        with writer_lock(config.database_path, 30):
            db = open_database(config.database_path)
            ingest_site(db, config)
            ingest_news(db, config, parse_workers=0)
            db.close()


def main() -> None:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    configs = [load_config(path) for path in sys.argv[1:]]
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped by the kernel
    for _ in sys.stdin:
        pid = os.fork()
        if pid == 0:
            try:
                ingest_for_ever(configs)
            finally:
                os._exit(0)
        print(pid, flush=True)


if __name__ == "__main__":
    main()
