"""Describing the API: the OpenAPI document, its schemas, the documentation page and its texts.

Everything here is derived from :mod:`service.api` (the endpoint table and the
parameters), so each endpoint is described once, and translated through
:mod:`service.i18n`. May import :mod:`service.api`, :mod:`service.http`,
:mod:`service.i18n`; not Datasette, not the replica.
"""
