"""``/metrics``: what ``qsite serve`` counts, in the Prometheus text format.

:mod:`~qsite.service.metrics.exported` names every metric and moves each worker's tally
(:mod:`qsite.service.http.tally`) into prometheus-client's files, one folder per server run
(multiprocess mode), so that any worker answers the sum over all of them;
:mod:`~qsite.service.metrics.database` reads the ingest history and the data version from the
database at scrape time; :mod:`~qsite.service.metrics.middleware` is the one place the request path
meets metrics: it times and counts every request, answers ``/metrics`` itself (never rate-limited,
its own ``metrics.allow``) and writes the access log.

Sits between :mod:`qsite.service.serve` and :mod:`qsite.service.datasette`: may import every room below.
"""
