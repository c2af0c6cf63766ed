"""The English OpenAPI document passes the linters SDK generators and portals use.

Spectral (``spectral:oas``) and Redocly (``recommended``), from npm, pinned in
``tools/package-lock.json`` and installed by ``make tools`` (``npm ci``; ``make test`` runs it), run
on the document exactly as /api/v1/openapi.json serves it: 0 errors.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.api_client import ApiClient, datasette_for_config
from tests.support.known_data import seeded_database

TOOLS = Path(__file__).resolve().parent.parent / "tools"
BIN = TOOLS / "node_modules" / ".bin"
#: No telemetry, no update checks: the linters talk to nobody.
QUIET = {"REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true", "NO_UPDATE_NOTIFIER": "1"}


@pytest.fixture(scope="module")
def document_file(tmp_path_factory):
    folder = tmp_path_factory.mktemp("lint")
    seeded_database(folder / "site.db").close()
    config = folder / "qsite.yml"
    config.write_text(f"database: {folder / 'site.db'}\nsite_export: {{source: export.json}}\napi: {{rate_limit: 'off'}}\n")
    client = ApiClient(datasette_for_config(config))
    try:
        response = client.get("/api/v1/openapi.json")
    finally:
        client.close()
    path = folder / "openapi.json"
    path.write_bytes(response.content)
    return path


def run(tool: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(BIN / tool), *args], capture_output=True, text=True, timeout=300, cwd=TOOLS, env={**os.environ, **QUIET}
    )


@pytest.mark.slow
@pytest.mark.requires("spectral")
def test_spectral_oas_finds_no_error(document_file):
    result = run("spectral", "lint", "--ruleset", str(TOOLS / ".spectral.yaml"), "--format", "json", "--quiet", str(document_file))
    findings = json.loads(result.stdout or "[]")
    errors = [f"{item['code']}: {item['message']} at {'.'.join(map(str, item['path']))}" for item in findings if item["severity"] == 0]
    assert not errors, errors
    assert result.returncode == 0, result.stderr[-2000:]


@pytest.mark.slow
@pytest.mark.requires("redocly")
def test_redocly_recommended_finds_no_error(document_file):
    result = run("redocly", "lint", "--config", str(TOOLS / "redocly.yaml"), "--format", "json", str(document_file))
    report = json.loads(result.stdout)
    errors = [
        f"{problem['ruleId']}: {problem['message']} at {problem['location'][0]['pointer']}"
        for problem in report["problems"]
        if problem["severity"] == "error"
    ]
    assert not errors, errors
    assert result.returncode == 0, result.stderr[-2000:]
