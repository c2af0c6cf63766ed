"""The scheme a trusted proxy forwards (``X-Forwarded-Proto``) makes the absolute links https (service/http/forwarded.py).

Behind nginx ending TLS every absolute URL qsite made said ``http://``: the
OpenAPI document's ``termsOfService``, Datasette's ``next_url`` and ``Link``,
its alternate links and the dashboard's chart requests (which a browser
blocks from an https page). ``tests/test_nginx.py`` runs the same through
nginx with TLS; here, the rule itself, through Datasette's own client.
"""

from __future__ import annotations

import re

import pytest

from qsite.service.http.forwarded import forwarded_entry, forwarded_scheme
from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.known_data import seeded_database


def scope(*headers: tuple[str, str]) -> dict:
    return {"type": "http", "scheme": "http", "headers": [(name.encode(), value.encode()) for name, value in headers]}


@pytest.mark.parametrize(
    ("headers", "trusted", "expected"),
    [
        ([("x-forwarded-proto", "https")], 1, "https"),
        ([("x-forwarded-proto", "HTTPS ")], 1, "https"),
        ([("x-forwarded-proto", "http")], 1, "http"),
        ([("x-forwarded-proto", "https")], 0, None),  # no proxy trusted: the client's own header
        ([], 1, None),
        ([("x-forwarded-proto", "gopher")], 1, None),  # only http and https
        ([("x-forwarded-proto", "")], 1, None),
        # a client's own value and the trusted proxy's after it: the proxy's
        ([("x-forwarded-proto", "http, https")], 1, "https"),
        ([("x-forwarded-proto", "http"), ("x-forwarded-proto", "https")], 1, "https"),
        # a CDN's, handed on by the load balancer: set once, at the edge
        ([("x-forwarded-proto", "https")], 2, "https"),
        ([("x-forwarded-proto", "https, http")], 2, "http"),  # the nearest proxy's, the one it sent
    ],
)
def test_the_scheme_is_what_the_nearest_trusted_proxy_sent(headers, trusted, expected):
    assert forwarded_scheme(scope(*headers), trusted) == expected


def test_x_forwarded_for_is_read_the_same_way():
    assert forwarded_entry(scope(("x-forwarded-for", "6.6.6.6, 10.0.0.1")), b"x-forwarded-for", 1) == "10.0.0.1"
    assert forwarded_entry(scope(("x-forwarded-for", "6.6.6.6, 10.0.0.1")), b"x-forwarded-for", 2) == "6.6.6.6"
    assert forwarded_entry(scope(("x-forwarded-for", "10.0.0.1")), b"x-forwarded-for", 2) is None


def links(client: ApiClient, headers: dict) -> list[str]:
    """Every absolute link the instance makes for one request of each kind."""
    found = [client.get("/api/v1/openapi.json", headers=headers).json()["info"]["termsOfService"]]
    page = client.get("/site/news.json?_size=1", headers=headers)
    found += [page.json()["next_url"], page.headers["link"].strip("<").split(">")[0]]
    html = client.get("/site/news?_size=1", headers=headers).text
    found += re.findall(r'<link rel="alternate" type="application/json\+datasette" href="([^"]+)"', html)
    dashboard = client.get("/-/dashboards/overview", headers=headers).text
    found += re.findall(r"renderChart\([^)]*'(https?://[^']*)'", dashboard)
    assert len(found) > 4, found  # every kind found one
    return found


@pytest.mark.parametrize(
    ("trusted", "proto", "said", "scheme"),
    [
        (1, True, "https", "https"),
        (0, False, "https", "http"),
        (1, True, "ftp", "http"),
        # a proxy trusted for X-Forwarded-For only: it may hand a client's X-Forwarded-Proto on
        (1, False, "https", "http"),
    ],
)
def test_absolute_links_take_the_scheme_the_trusted_proxy_says(make_config, tmp_path, trusted, proto, said, scheme):
    seeded_database(tmp_path / "site.db").close()
    config = make_config(api={"rate_limit": "off", "trusted_proxies": trusted, "forwarded_proto": proto})
    with ApiClient(datasette_for_config(config)) as client:
        found = links(client, {"X-Forwarded-Proto": said, "X-Forwarded-For": "192.0.2.1"})
        assert all(link.startswith(f"{scheme}://localhost/") for link in found), found
