"""Requests to the API in the test's own process, through ``datasette.client``: no server, no port."""

from __future__ import annotations

import asyncio

import httpx

from qsite.config import load_config
from qsite.service.serve.app import make_datasette
from tests.support.config_files import write_config
from tests.support.openapi_check import OpenAPICheck


class ApiClient:
    """Requests through ``datasette.client`` on one event loop; /api/v1 answers are checked against OpenAPI."""

    def __init__(self, datasette, check: bool = True):
        self.datasette = datasette
        self.loop = asyncio.new_event_loop()
        self.openapi = None
        self.check = check
        if check:
            document = self.request("GET", "/api/v1/openapi.json", validate=False).json()
            self.openapi = OpenAPICheck(document)

    def run(self, coroutine):
        return self.loop.run_until_complete(coroutine)

    def request(self, method: str, path: str, validate: bool = True, **kwargs) -> httpx.Response:
        response = self.run(self.datasette.client.request(method, path, **kwargs))
        if validate and self.openapi is not None and response.request.url.path.startswith("/api/v1"):
            self.openapi.check(method, response)
        return response

    def get(self, path: str, **kwargs) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def head(self, path: str, **kwargs) -> httpx.Response:
        return self.request("HEAD", path, **kwargs)

    def close(self) -> None:
        # background tasks (the rate limiter's expiry timer) end with the loop
        pending = asyncio.all_tasks(self.loop)
        for task in pending:
            task.cancel()
        if pending:
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        self.loop.close()

    def __enter__(self) -> "ApiClient":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()


def datasette_for_config(config_path):
    """The Datasette ``qsite serve`` would run for this config."""
    return make_datasette(load_config(config_path))


def news_client(make_config, database, items: list[dict], prepare=None) -> ApiClient:
    """An :class:`ApiClient` over a new database at ``database``: the known catalog, ``items`` as news, no rate limit.

    ``prepare(db)`` adds what a test needs besides, before the news (a source of its own).
    ``make_config`` is the fixture of that name: its config names ``database``'s folder's ``site.db``.
    """
    from qsite.pipeline.store import open_database
    from tests.support.known_data import seed_catalog, seed_news

    db = open_database(database)
    seed_catalog(db)
    if prepare is not None:
        prepare(db)
    seed_news(db, items)
    db.close()
    return ApiClient(datasette_for_config(make_config(api={"rate_limit": "off"})))


def shared_news_client(tmp_path_factory, items: list[dict]) -> ApiClient:
    """:func:`news_client` in a folder of its own, for a module-scoped fixture whose tests only read."""
    folder = tmp_path_factory.mktemp("news")
    return news_client(lambda **overrides: write_config(folder, **overrides), folder / "site.db", items)
