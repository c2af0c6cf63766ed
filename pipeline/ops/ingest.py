"""One ingest run as every entry point makes it: the writer lock, a connection of its own, the steps in order.

``qsite ingest site|news|all``, the scheduler's jobs and ``qsite up`` all
call :func:`run_ingest`, so they take the lock, open the database and order
the steps the same way.
"""

from __future__ import annotations

from typing import Callable

from qsite.config import Config

from qsite.pipeline.news import ingest as news
from qsite.pipeline.site import ingest as site_export
from qsite.pipeline.store.lock import DEFAULT_WAIT, writer_lock
from qsite.pipeline.report import RunReport
from qsite.pipeline.store import open_database

#: The ingests by the ``kind`` of their ``ingest_runs`` rows and reports.
SITE, NEWS = site_export.KIND, news.KIND
#: What ``qsite ingest all`` runs, in this order: the site export, then the news sweep.
ALL = (SITE, NEWS)


def run_ingest(
    config: Config,
    wait: float = DEFAULT_WAIT,
    kinds: tuple[str, ...] = ALL,
    progress: Callable[[RunReport], None] | None = None,
    now: bool = False,
) -> list[RunReport]:
    """Run the ingests named in ``kinds``, in order, holding the writer lock across all of them.

    :param wait: seconds to wait for another writer (:class:`qsite.pipeline.store.lock.WriterLockTimeout` after that).
    :param progress: called with each report as soon as it is stored: the site
        export's, then each news source's in config order.
    :param now: fetch every enabled news source, those backing off after a failure too.
    :raises qsite.pipeline.store.StoreError: when the database cannot be opened or migrated.
    """
    with writer_lock(config.database_path, wait):
        db = open_database(config.database_path)
        try:
            reports = []
            if SITE in kinds:
                reports.append(site_export.ingest_site(db, config))
                if progress:
                    progress(reports[-1])
            if NEWS in kinds:
                reports += news.ingest_news(db, config, progress=progress, now_asked=now)
            return reports
        finally:
            db.close()
