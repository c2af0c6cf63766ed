"""What the fetcher sends: every request names the project in its User-Agent."""

from __future__ import annotations

import json

import pytest

from qsite.db.model import VERSION as __version__
from tests.support.feeds import RSS_TYPE
from tests.support.local_server import Reply
from tests.support.paths import FEEDS

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow


def test_every_request_names_qsite_in_its_user_agent(qsite, make_config, http_server, sample_export):
    http_server.routes["/export.json"] = Reply(200, json.dumps(sample_export), {"Content-Type": "application/json"})
    http_server.routes["/lab.xml"] = Reply(200, (FEEDS / "lab-notes.xml").read_bytes(), RSS_TYPE)
    config = make_config(
        site_export={"source": http_server.url("/export.json")},
        news={"sources": [{"name": "Lab Notes", "url": http_server.url("/lab.xml"), "tag": "Science"}]},
    )
    result = qsite("ingest", "all", "--config", str(config))
    assert result.returncode == 0, result.stderr
    assert sorted(request.path for request in http_server.requests) == ["/export.json", "/lab.xml"]
    for request in http_server.requests:
        assert request.headers["user-agent"].startswith(f"qsite/{__version__} ("), request.headers
