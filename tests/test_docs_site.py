"""The documentation site (docs/): generated pages current, and a build without a warning.

The configuration, CLI and API references are written by cog from the code
(``docs/_generate.py``, ``make cog``); ``cog --check`` fails when the code changed
and a page was not regenerated. The site is built as ``make docs`` builds it
(Sphinx, ``-W --keep-going``), where a link to a missing page or heading is a
warning and so an error: internal links are checked offline, by the build itself.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import ROOT as PROJECT

DOCS = PROJECT / "docs"


def cog(*args: str, cwd: Path = PROJECT) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "cogapp", "-I", str(DOCS), *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


def sphinx_build(source: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(source), str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_generated_pages_match_the_code():
    pages = sorted(str(page) for page in DOCS.glob("*.md"))
    result = cog("--check", *pages)
    assert result.returncode == 0, (
        "a generated documentation page no longer matches the code; run `make cog` and commit the pages:\n"
        + result.stdout
        + result.stderr
    )


def test_a_stale_page_fails_the_check(tmp_path):
    page = tmp_path / "configuration.md"
    text = (DOCS / "configuration.md").read_text(encoding="utf-8")
    assert "| `api.sql_time_limit_ms` |" in text
    # a key as an older config model had it: the row's default no longer what the model says
    stale = re.sub(r"(\| `api\.sql_time_limit_ms` \| [^|]+ \| )`1000`", r"\1`500`", text)
    assert stale != text
    page.write_text(stale, encoding="utf-8")
    result = cog("--check", str(page))
    assert result.returncode != 0
    assert "configuration.md" in result.stdout + result.stderr


def test_every_config_key_and_command_is_in_the_reference():
    sys.path.insert(0, str(DOCS))
    try:
        import _generate
    finally:
        sys.path.remove(str(DOCS))
    configuration = (DOCS / "configuration.md").read_text(encoding="utf-8")
    for key, *_ in _generate.config_rows():
        assert f"| `{key}` |" in configuration, key
    cli = (DOCS / "cli.md").read_text(encoding="utf-8")
    for words in (["qsite"], ["qsite", "ingest", "news"], ["qsite", "serve"], ["qsite", "status"]):
        assert f"$ {' '.join(words)} --help" in cli



def test_config_bounds_show_in_the_type_column():
    """A field's ge/gt/le bounds show in its type, inside ``... | None`` and on durations too."""
    sys.path.insert(0, str(DOCS))
    try:
        import _generate
    finally:
        sys.path.remove(str(DOCS))
    types = {key: type_name for key, type_name, *_ in _generate.config_rows()}
    assert types["api.workers"] == "integer 1 to 256 or null"
    assert types["news.retention_days"] == "integer >= 1 or null"  # gt=0, in whole days
    assert types["api.header_timeout"] == "[duration](#values) `1s` to `5m`"
    assert types["api.sql_time_limit_ms"] == "integer 10 to 60000"
    assert types["snapshots.store"] == "non-empty string or null"

def test_every_parameter_value_is_described():
    """Each parameter's value column says what it takes: OneOf's anyOf (an enum or any letter case) included."""
    sys.path.insert(0, str(DOCS))
    try:
        import _generate
    finally:
        sys.path.remove(str(DOCS))
    from qsite.service.api.kinds import OneOf

    table = _generate.api_parameters()
    rows = {}
    for line in table.splitlines()[2:]:
        name, _endpoints, value, _description = (cell.strip() for cell in line.strip("|").split(" | "))
        assert value and not value.startswith(";"), line
        rows.setdefault(name, value)
    assert rows["`tag` (query)"] == "one of `Science`, `Industry`, `Investing` (any letter case)"
    assert rows["`sort` (query)"] == "one of `-published_at`, `published_at` (any letter case); default `-published_at`"
    assert rows["`lang` (query)"].startswith("one of `en`, ")
    assert rows["`lang` (query)"].endswith("(any letter case); default `en`")
    # a OneOf of values not yet in the document is described from its own schema the same way
    kind = OneOf(("Alpha", "beta"), "Example")
    document = {"components": {"schemas": {"Example": kind.enum}}}
    assert _generate._schema_text(kind.schema, document) == "one of `Alpha`, `beta` (any letter case)"


@pytest.mark.slow  # a whole Sphinx build
def test_the_site_builds_without_a_warning(tmp_path):
    result = sphinx_build(DOCS, tmp_path / "html")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    cli = (tmp_path / "html" / "cli.html").read_text(encoding="utf-8")
    assert "qsite ingest news --help" in cli
    api = (tmp_path / "html" / "api.html").read_text(encoding="utf-8")
    assert "/api/v1/glossary/{id}" in api
    # The READMEs of tests/ and bench/ are pages of the site, linked from its index; no empty "Index" page.
    index = (tmp_path / "html" / "index.html").read_text(encoding="utf-8")
    for page, words in (("tests", "Outside programs"), ("bench", "The files")):
        assert f'href="{page}.html"' in index
        assert words in (tmp_path / "html" / f"{page}.html").read_text(encoding="utf-8")
    assert not (tmp_path / "html" / "genindex.html").exists() and "genindex" not in index


@pytest.mark.slow  # a whole Sphinx build
def test_a_broken_internal_link_fails_the_build(tmp_path):
    """The offline link check: a link to a heading that does not exist stops the build."""
    source = tmp_path / "docs"
    source.mkdir()
    shutil.copy(DOCS / "conf.py", source / "conf.py")
    (source / "index.md").write_text("# Home\n\n```{toctree}\npage\n```\n\n## A heading\n", encoding="utf-8")
    (source / "page.md").write_text(
        "# Page\n\nSee [the heading](index.md#a-heading) and [this one](index.md#no-such-heading).\n", encoding="utf-8"
    )
    result = sphinx_build(source, tmp_path / "html")
    assert result.returncode != 0
    assert "no-such-heading" in result.stderr
    assert "a-heading'" not in result.stderr  # the good link is not reported


def test_readme_is_short_and_its_links_lead_somewhere():
    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    targets = re.findall(r"\]\(((?!https?://)[^)#]+)(?:#[^)]*)?\)", readme)
    assert any(target.startswith("docs/") for target in targets)
    for target in targets:
        assert (PROJECT / target).exists(), target


def test_readme_lists_every_endpoint():
    """The README's endpoint table is written by hand: a new endpoint must reach it too."""
    from qsite.service.describe.openapi import build_document

    readme = (PROJECT / "README.md").read_text(encoding="utf-8")
    missing = [path for path in build_document(300)["paths"] if f"`{path}`" not in readme]
    assert not missing, f"README.md's endpoint table lacks {missing}"
