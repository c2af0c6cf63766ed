"""A port already in use is refused with one line and status 1: never a second server on it (service/serve/ports.py claim_port).

Granian listens with ``SO_REUSEPORT``, which Linux lets any number of sockets
share: without the check a second ``qsite serve`` started silently and the
kernel split the connections between two servers.
"""

from __future__ import annotations

import socket

import httpx
import pytest

from qsite.service.serve.ports import claim_port
from tests.support.processes import free_port, qsite_serve, run_qsite

#: Real processes and servers, seconds each: `make test-fast` leaves these out (tests/README.md).
pytestmark = pytest.mark.slow


def refused(result, port: int) -> str:
    """The one line of a refused start, checked: status 1, one stderr line naming the port and what to do."""
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ") and f"127.0.0.1:{port} is already in use" in lines[0], lines[0]
    assert "--port" in lines[0] and "PORT=" in lines[0]
    return lines[0]


def test_a_second_qsite_serve_on_a_busy_port_is_refused(seeded_config, tmp_path):
    with qsite_serve(seeded_config, tmp_path / "first.log") as first:
        second = run_qsite("serve", "--config", str(seeded_config), "--port", str(first.port), "--log-level", "WARNING", timeout=60)
        assert "another qsite server is starting or serving there" in refused(second, first.port)
        # the first still serves, alone
        assert httpx.get(first.url("/api/v1"), timeout=5).status_code == 200


@pytest.mark.parametrize("reuseport", [False, True], ids=["plain", "SO_REUSEPORT"])
def test_a_port_another_program_listens_on_is_refused(seeded_config, reuseport):
    # SO_REUSEPORT: what granian (another qsite, another granian app) sets, and what let a second server in
    with socket.socket() as other:
        if reuseport:
            other.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        result = run_qsite("serve", "--config", str(seeded_config), "--port", str(port), "--log-level", "WARNING", timeout=60)
        refused(result, port)


def test_a_port_another_qsite_is_starting_on_is_refused(seeded_config):
    # the lock file per address: two servers started at once cannot both pass the probe
    port = free_port()
    with claim_port("127.0.0.1", port):
        result = run_qsite("serve", "--config", str(seeded_config), "--port", str(port), "--log-level", "WARNING", timeout=60)
    assert "another qsite server is starting or serving there" in refused(result, port)


def test_qsite_up_refuses_a_busy_port_before_ingesting(seeded_config):
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        port = other.getsockname()[1]
        result = run_qsite("up", "--config", str(seeded_config), "--port", str(port), "--log-level", "WARNING", timeout=60)
    refused(result, port)


def test_qsite_up_refuses_a_port_out_of_range_before_ingesting(make_config, tmp_path):
    result = run_qsite("up", "--config", str(make_config()), "--port", "70000", timeout=60)
    assert result.returncode == 2
    assert "Invalid value for '--port': 70000 is not in the range 0<=x<=65535." in result.stderr, result.stderr
    assert not (tmp_path / "site.db").exists()  # nothing ingested, nothing started


@pytest.mark.parametrize("how", ["config", "env"])
def test_qsite_up_refuses_workers_memory_storage_cannot_serve_before_ingesting(make_config, tmp_path, how):
    """api.workers (or QSITE_WORKERS) of 2 with memory:// storage: serve would refuse it after a whole first ingest."""
    api = {"rate_limit_storage": "memory://", **({"workers": 2} if how == "config" else {})}
    env = {"QSITE_WORKERS": "2"} if how == "env" else {}
    result = run_qsite("up", "--config", str(make_config(api=api)), "--port", "0", timeout=60, env=env)
    assert result.returncode == 2, result.stderr
    assert "2 worker processes cannot share" in result.stderr, result.stderr
    assert not (tmp_path / "site.db").exists()  # nothing ingested, nothing started

