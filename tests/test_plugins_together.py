"""qsite next to another plugin: its POST route and its own exception handler work beside qsite's.

The other plugin is a tiny one made here, registered as Datasette's plugin
documentation shows for tests (``pm.register``): a POST route (as a login or
write plugin has) and a ``handle_exception`` that answers its own exceptions.
qsite still answers 405 for other methods on /api/v1, and its own errors.
"""

from __future__ import annotations

import pytest
from datasette import Response, hookimpl
from datasette.plugins import pm

from tests.support.api_client import ApiClient, datasette_for_config


class Teapot(Exception):
    """The other plugin's own exception, answered by its own handler."""


class OtherPlugin:
    __name__ = "other_plugin"

    @hookimpl
    def register_routes(self):
        async def echo(request):
            if request.method != "POST":
                return Response.text("POST here", status=405)
            body = await request.post_vars()
            return Response.json({"echo": dict(body)})

        async def teapot(request):
            raise Teapot("short and stout")

        return [(r"^/-/other/echo$", echo), (r"^/-/other/teapot$", teapot)]

    @hookimpl
    def skip_csrf(self, scope):
        return scope["path"] == "/-/other/echo"

    @hookimpl
    def handle_exception(self, request, exception):
        if isinstance(exception, Teapot):
            return Response.json({"teapot": str(exception)}, status=418)
        return None


@pytest.fixture
def both(seeded_config):
    plugin = OtherPlugin()
    pm.register(plugin, name="other_plugin")
    try:
        with ApiClient(datasette_for_config(seeded_config)) as client:
            yield client
    finally:
        pm.unregister(plugin, name="other_plugin")


def test_another_plugins_post_route_works(both):
    response = both.request("POST", "/-/other/echo", data={"word": "hello"})
    assert response.status_code == 200, response.text
    assert response.json() == {"echo": {"word": "hello"}}


def test_another_plugins_exception_handler_answers_its_exceptions(both):
    response = both.get("/-/other/teapot")
    assert response.status_code == 418
    assert response.json() == {"teapot": "short and stout"}


def test_qsite_keeps_its_own_paths(both):
    refused = both.request("POST", "/api/v1/news", data={"word": "hello"})
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET, HEAD, OPTIONS"
    missing = both.get("/api/v1/nope")
    assert missing.status_code == 404 and missing.json()["type"] == "/api/v1/problems/not-found"
    assert both.get("/api/v1/courses").status_code == 200
    # Datasette's own errors elsewhere are still answered without a 5xx (service/datasette/errors.py)
    assert both.get("/site/news.json?_sort=nope").status_code == 400
