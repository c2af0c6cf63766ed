"""Describing the API: the OpenAPI document, its schemas, the documentation page and its texts.

Everything here is derived from :mod:`qsite.service.api` (the endpoint table and the
parameters), so each endpoint is described once, and translated through
:mod:`qsite.service.i18n`. May import :mod:`qsite.service.api`, :mod:`qsite.service.http`,
:mod:`qsite.service.i18n`; not Datasette, not the replica.
"""
