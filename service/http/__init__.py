"""HTTP plumbing shared by every room: problem documents, request targets, the rate limit, the SQL budget,
what trusted proxies forward.

The bottom of :mod:`service`, with :mod:`qsite.service.i18n`: may import ``config``
and ``db`` only.
"""
