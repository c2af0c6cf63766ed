"""Clients generated from /api/v1/openapi.json, as an integrator would, work against a real ``qsite serve``.

The document is read from a following replica (``qsite serve --follow`` over a
snapshot ``qsite publish`` wrote of the known data), which answers every
endpoint, the snapshot ones included. From it, at test time, into a temporary
folder: a Python client by openapi-python-client and TypeScript types by
openapi-typescript, each without a single warning. The Python client has one
method per GET endpoint (HEAD and OPTIONS are no operations) and one module per
model and enum, no enum twice. Both clients then call every endpoint: a
success, an error and a HEAD of each, every answer parsed by the client's own
code (Python) or typed by the generated types and checked at run time (a
TypeScript program compiled by ``tsc --strict`` and run by Node.js).
"""

from __future__ import annotations

import enum
import hashlib
from datetime import datetime, timezone
import importlib
import inspect
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.config_files import write_config
from tests.support.known_data import seeded_database
from tests.support.openapi_check import OpenAPICheck
from tests.support.processes import qsite_serve, run_qsite, wait_until
from tests.support.schemathesis_cli import run_phases

ROOT = Path(__file__).resolve().parent.parent
TOOLS = ROOT / "tools"
NODE_BIN = TOOLS / "node_modules" / ".bin"
#: The TypeScript program that calls every endpoint with the generated types.
SMOKE_TS = Path(__file__).resolve().parent / "data" / "generated_clients" / "smoke.mts"
#: openapi-python-client formats its output with ruff (a dependency of it): ruff must be on PATH.
VENV_BIN = Path(sys.executable).parent
QUIET = {"NO_UPDATE_NOTIFIER": "1", "REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true"}
PACKAGE = "qsite_generated_client"
#: Every test here reads a real `qsite serve --follow` replica, and most generate a client first.
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def replica(tmp_path_factory):
    """A following replica serving a published snapshot of the known catalog and news."""
    folder = tmp_path_factory.mktemp("clients")
    seeded_database(folder / "site.db").close()
    config = write_config(
        folder,
        snapshots={"store": str(folder / "store"), "poll": "1s", "keep": 5},
        api={"cache_max_age": 60, "rate_limit": "off"},
    )
    published = run_qsite("publish", "--config", str(config))
    assert published.returncode == 0, published.stderr[-2000:]
    args = ["--follow", "--data-dir", str(folder / "replica")]
    with qsite_serve(config, folder / "replica.log", args=args) as served:
        ready = lambda: httpx.get(served.url("/api/v1/snapshot"), timeout=5).status_code == 200  # noqa: E731
        assert wait_until(ready, 30), (folder / "replica.log").read_text()[-2000:]
        served.folder = folder
        yield served
    assert "Traceback" not in (folder / "replica.log").read_text()


@pytest.fixture(scope="module")
def document_file(replica) -> Path:
    response = httpx.get(replica.url("/api/v1/openapi.json"))
    assert response.status_code == 200
    path = replica.folder / "openapi.json"
    path.write_bytes(response.content)
    return path


@pytest.fixture(scope="module")
def openapi(document_file) -> OpenAPICheck:
    import json

    return OpenAPICheck(json.loads(document_file.read_text()))


#: The generator's config an integrator would use too: the Atom feed read as text (docs/api.md).
GENERATOR_CONFIG = Path(__file__).parent / "data" / "generated_clients" / "python-client.yml"


@pytest.fixture(scope="module")
def python_client(document_file):
    """The generated package, imported; and the generator's output, for its warnings."""
    out = document_file.parent / "python"
    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        [str(VENV_BIN / "openapi-python-client"), "generate", "--path", str(document_file),
         "--output-path", str(out / PACKAGE), "--meta", "none", "--config", str(GENERATOR_CONFIG)],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    sys.path.insert(0, str(out))
    try:
        package = importlib.import_module(PACKAGE)
        yield package, result.stdout + result.stderr
    finally:
        sys.path.remove(str(out))
        for name in [name for name in sys.modules if name == PACKAGE or name.startswith(PACKAGE + ".")]:
            del sys.modules[name]


def submodules(package_name: str) -> dict[str, object]:
    package = importlib.import_module(package_name)
    return {info.name: importlib.import_module(f"{package_name}.{info.name}") for info in pkgutil.iter_modules(package.__path__)}


def test_openapi_python_client_generates_without_a_warning(python_client, document_file):
    _package, output = python_client
    # "Warning(s) encountered", "WARNING parsing ...", and "ruff is not in PATH" (unformatted code)
    assert not re.search(r"warning|not in path|skipping", output, re.I), output[-3000:]


def test_the_python_client_has_one_method_per_get_endpoint_and_each_type_once(python_client, openapi):
    operations = {
        (tag, name)
        for tag in submodules(f"{PACKAGE}.api")
        for name in submodules(f"{PACKAGE}.api.{tag}")
    }
    gets = {(item["get"]["tags"][0], item["get"]["operationId"]) for item in openapi.document["paths"].values()}
    assert len(operations) == len(gets) == len(openapi.document["paths"])
    assert not [name for _tag, name in operations if name.endswith(("_head", "_preflight"))]
    models = submodules(f"{PACKAGE}.models")
    enums: dict[frozenset, str] = {}
    for name, module in models.items():
        own = [obj for obj in vars(module).values() if inspect.isclass(obj) and obj.__module__ == module.__name__]
        assert len(own) == 1, (name, own)  # one module per model or enum
        if issubclass(own[0], enum.Enum):
            values = frozenset(member.value for member in own[0])
            assert values not in enums, f"{own[0].__name__} repeats {enums.get(values)}"
            enums[values] = own[0].__name__
    assert {"Tag", "LanguageCode"} <= set(enums.values())
    # members named as the document names them (x-enum-varnames), not VALUE_0, VALUE_1, ...
    assert models["problem_type"].ProblemType.INVALID_PARAMETERS.value == "/api/v1/problems/invalid-parameters"
    assert models["problem_status"].ProblemStatus.NOT_FOUND.value == 404
    assert not [name for name in models if re.search(r"_tag(_type_\d+)*$|_lang$", name) and name != "tag"]


def test_the_python_client_calls_every_endpoint_and_parses_every_answer(python_client, replica, openapi):
    package, _output = python_client
    api = {name: module for tag in submodules(f"{PACKAGE}.api") for name, module in submodules(f"{PACKAGE}.api.{tag}").items()}
    models = importlib.import_module(f"{PACKAGE}.models")
    types = importlib.import_module(f"{PACKAGE}.types")
    client = package.Client(base_url=replica.base, raise_on_unexpected_status=True)
    raw = client.get_httpx_client()
    called = set()

    def call(name: str, expected_status: int, expected_type, **arguments):
        response = api[name].sync_detailed(client=client, **arguments)
        assert response.status_code == expected_status, (name, arguments, response.content[:300])
        assert isinstance(response.parsed, expected_type), (name, type(response.parsed))
        # the answer as the server sent it matches the document, and its HEAD does too, without a body
        request = httpx.Request("GET", replica.url(api[name]._get_kwargs(**arguments)["url"]))
        openapi.check("GET", httpx.Response(response.status_code, headers=response.headers, content=response.content, request=request))
        head = raw.request("HEAD", **{key: value for key, value in api[name]._get_kwargs(**arguments).items() if key != "method"})
        assert head.status_code == expected_status and head.content == b"", (name, head.status_code)
        openapi.check("HEAD", head)
        called.add(name)
        return response.parsed

    def error(name: str, url: str, status: int):
        """An answer the generated code cannot ask for (an unknown parameter), parsed by that code."""
        response = raw.get(url)
        parsed = api[name]._build_response(client=client, response=response).parsed
        assert isinstance(parsed, models.Problem) and parsed.status == status == response.status_code, (url, parsed)
        assert str(parsed.type_).startswith("/api/v1/problems/")
        openapi.check("GET", response)
        head = raw.head(url)
        assert head.status_code == status and head.content == b""
        openapi.check("HEAD", head)

    index = call("index", 200, models.Index)
    assert index.version == "v1" and {language.code for language in index.languages} == set(models.LanguageCode)
    document = call("openapi", 200, models.OpenAPI, lang=models.LanguageCode.DE)
    assert document.openapi == "3.1.0"
    # any letter case, as the schema says (the enum, or its words in any case)
    assert call("openapi", 200, models.OpenAPI, lang="ZH-hans").info
    assert "<html" in call("docs", 200, str, lang=models.LanguageCode.FR)
    courses = call("courses", 200, models.CourseList)
    assert courses.count == len(courses.results) > 0 and courses.results[0].sections
    glossary = call("glossary", 200, models.GlossaryList)
    entry = call("glossary_entry", 200, models.GlossaryEntry, id=glossary.results[0].id)
    assert entry.term == glossary.results[0].term
    assert call("glossary_entry", 404, models.Problem, id="no-such-entry").status == 404
    page = call("news", 200, models.NewsPage, tag=models.Tag.SCIENCE, limit=2)
    assert page.tag is models.Tag.SCIENCE and len(page.results) == 2 and all(item.tag is models.Tag.SCIENCE for item in page.results)
    cursor = httpx.URL(page.next_).params["cursor"]
    after = call("news", 200, models.NewsPage, tag="science", limit=2, cursor=cursor)
    assert after.tag is models.Tag.SCIENCE and after.results[0].published_at <= page.results[-1].published_at
    everything = call("news", 200, models.NewsPage)
    assert everything.tag is None and everything.count >= page.count
    problem = call("news", 400, models.Problem, limit=0)
    assert [error.parameter for error in problem.errors] == ["limit"]
    EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
    item = call("news_item", 200, models.NewsItem, id=page.results[0].id)
    assert (item.id, item.title, item.url) == (page.results[0].id, page.results[0].title, page.results[0].url)
    assert call("news_item", 404, models.Problem, id="0" * len(item.id)).status == 404
    oldest = call("news", 200, models.NewsPage, sort=models.NewsSort.PUBLISHED_AT, limit=2)
    assert oldest.results[0].published_at <= oldest.results[-1].published_at
    atom = call("news_atom", 200, str, tag=models.Tag.SCIENCE, limit=2)
    assert "<feed" in atom and page.results[0].url in atom
    json_feed = call("news_json", 200, models.JsonFeed, limit=2)
    assert json_feed.version.startswith("https://jsonfeed.org/version/1.1") and len(json_feed.items) == 2
    error("news_atom", "/api/v1/news.atom?limit=0", 400)
    # what changed since a time, oldest change first (a mirror's sync), and what was removed
    changed = call("news", 200, models.NewsPage, updated_since=EPOCH, limit=3)
    assert [item.updated_at for item in changed.results] == sorted(item.updated_at for item in changed.results)
    removed = call("news_removed", 200, models.RemovedPage, since=EPOCH)
    assert removed.count == len(removed.results) and removed.next_ is None
    error("news_removed", "/api/v1/news/removed?since=yesterday", 400)
    sources = call("sources", 200, models.SourceList)
    assert {source.tag for source in sources.results} <= set(models.Tag)
    assert call("stats", 200, models.Stats).news_items == everything.count
    snapshot = call("snapshot", 200, models.Snapshot)
    # the seeded data is days old: a 503 whose body the client parses as the same Health
    health = call("health", 503, models.Health)
    assert health.status == models.HealthStatus.STALE and health.snapshot == snapshot.file
    file = call("snapshot_file", 200, types.File, file=snapshot.file)
    assert hashlib.sha256(file.payload.read()).hexdigest() == snapshot.sha256
    assert call("snapshot_file", 404, models.Problem, file="site-v00000001-0000000000000000.db").status == 404
    # 304: no body, parsed as nothing
    etag = raw.get("/api/v1/stats").headers["etag"]
    assert api["stats"]._build_response(client=client, response=raw.get("/api/v1/stats", headers={"If-None-Match": etag})).parsed is None
    assert called == set(api), set(api) - called

    paths = {name: module._get_kwargs(**({"id": "x"} if name in ("glossary_entry", "news_item") else {"file": "x"} if name == "snapshot_file" else {}))["url"] for name, module in api.items()}
    for name, path in paths.items():
        error(name, f"{path}?unknown=1", 400)  # an unknown parameter


def run_node_tool(tool: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(NODE_BIN / tool), *args], capture_output=True, text=True, timeout=300, cwd=cwd, env={**os.environ, **QUIET})


@pytest.mark.requires("openapi-typescript", "tsc", "node")
def test_openapi_typescript_types_compile_and_call_every_endpoint(document_file, replica):
    folder = document_file.parent / "typescript"
    folder.mkdir()
    generated = run_node_tool("openapi-typescript", str(document_file), "--output", str(folder / "api.d.ts"), cwd=folder)
    output = generated.stdout + generated.stderr
    assert generated.returncode == 0, output[-3000:]
    # openapi-typescript prints each finding (an unused component, a missing license) as a ⚠ line
    assert "\u26a0" not in output and "warn" not in output.lower(), output[-3000:]
    (folder / "smoke.mts").write_text(SMOKE_TS.read_text())
    compiled = run_node_tool(
        "tsc", "--strict", "--noEmitOnError", "--target", "es2022", "--module", "es2022", "--moduleResolution", "bundler",
        "--lib", "es2022,dom", "--outDir", str(folder / "out"), str(folder / "smoke.mts"),
        cwd=folder,
    )
    assert compiled.returncode == 0, compiled.stdout[-3000:] + compiled.stderr[-3000:]
    ran = subprocess.run(
        ["node", str(folder / "out" / "smoke.mjs")], capture_output=True, text=True, timeout=120,
        env={**os.environ, "QSITE_BASE": replica.base},
    )
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert ran.stdout.split() == ["ok", "endpoints=12"], ran.stdout


def test_schemathesis_follows_the_snapshot_to_its_file_on_a_replica(replica):
    """The stateful phase on a replica, where the snapshot endpoints answer: /api/v1/snapshot's file
    fed to /api/v1/snapshot/{file}, whose bytes are checked against the binary schema; 0 failures."""
    output = run_phases(replica.url("/api/v1/openapi.json"), "examples,stateful", 20, replica.folder / "schemathesis.json")
    assert "Missing test data" not in output, output[-3000:]
