"""``/metrics``: what ``qsite serve`` counts, in the Prometheus text format.

:mod:`~service.metrics.exported` names every metric and moves each worker's tally
(:mod:`service.http.tally`) into prometheus-client's files, one folder per server run
(multiprocess mode), so that any worker answers the sum over all of them;
:mod:`~service.metrics.database` reads the ingest history and the data version from the
database at scrape time; :mod:`~service.metrics.middleware` is the one place the request path
meets metrics: it times and counts every request, answers ``/metrics`` itself (never rate-limited,
its own ``metrics.allow``) and writes the access log.

Sits between :mod:`service.serve` and :mod:`service.datasette`: may import every room below.
"""
