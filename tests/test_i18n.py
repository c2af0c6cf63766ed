"""Interface languages: every catalog complete and faithful, and identifiers never translated."""

from __future__ import annotations

import re
import tomllib
from collections import Counter
from pathlib import Path

import pytest
from babel.messages.extract import extract_from_file
from babel.messages.pofile import read_po

from qsite.service.i18n import LANGUAGES, Catalogs, catalog_path, document_texts, find_language, translate_document
from qsite.service.describe.messages import interface_texts
from qsite.service.describe.openapi import build_document

ROOT = Path(__file__).resolve().parent.parent

#: What a translation must carry over unchanged: gettext placeholders, paths, numbers,
#: snake_case field names, HTTP header names (If-None-Match), CamelCase names (ETag,
#: RateLimit, OpenAPI) and acronyms (RFC, UTC, GET).
KEPT = re.compile(
    r"%\(\w+\)s|\{\w+\}|/api/v1[\w/{}.-]*|\b\d+(?:\.\d+)*\b|\b[a-z]+(?:_[a-z]+)+\b"
    r"|\b[A-Z][a-z]+(?:[A-Z][a-z]+)*(?:-[A-Z][a-z]+(?:[A-Z][a-z]+)*)+\b|\b(?=\w*[a-z])[A-Z]\w*[A-Z]\w*\b|\b[A-Z]{3,}\b"
)


def live_messages() -> set[str]:
    """The English texts as the code has them now, through the same mapping ``make i18n-extract`` uses."""
    mappings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["babel"]["mappings"]
    found = set()
    for mapping in mappings:
        paths = sorted(ROOT.glob(mapping["pattern"]))
        assert paths, f"pyproject.toml [tool.babel] pattern {mapping['pattern']!r} matches no file"
        for path in paths:
            for _lineno, message, _comments, _context in extract_from_file(mapping["method"], str(path)):
                found.add(message)
    return found


@pytest.fixture(scope="module")
def messages() -> set[str]:
    return live_messages()


def read_catalog(language):
    with open(catalog_path(language), "rb") as fp:
        return read_po(fp, locale=language.catalog_dir)


def test_the_extractor_sees_every_text_of_the_document(messages):
    texts = {text for _where, text in interface_texts()}
    assert texts <= messages
    # the document's own texts, the problem titles and the page's sentences
    assert "Invalid query parameters" in messages and "Usage terms" in messages
    assert any("Fair use" in text for text in texts)


@pytest.mark.parametrize("language", LANGUAGES, ids=lambda language: language.code)
def test_every_message_is_translated_in_every_catalog(language, messages):
    catalog = read_catalog(language)
    entries = {message.id: message for message in catalog if message.id}
    missing = sorted(messages - set(entries))
    assert not missing, f"{catalog_path(language)} lacks {len(missing)} texts (run make messages): {missing[:3]}"
    stale = sorted(set(entries) - messages)
    assert not stale, f"{catalog_path(language)} has texts the code no longer has (run make messages): {stale[:3]}"
    for message in entries.values():
        assert message.string, f"{language.code}: untranslated: {message.id!r}"
        assert not message.fuzzy, f"{language.code}: fuzzy (needs review): {message.id!r}"
        if language.code == "en":
            assert message.string == message.id


@pytest.mark.parametrize("language", LANGUAGES, ids=lambda language: language.code)
def test_placeholders_and_identifiers_survive_translation(language):
    catalog = read_catalog(language)
    problems = [(message.id, errors) for message, errors in catalog.check()]
    assert not problems, problems  # Babel's checkers: python-format placeholders match
    for message in catalog:
        if not message.id:
            continue
        wanted = Counter(KEPT.findall(message.id))
        got = Counter(KEPT.findall(message.string))
        lost = wanted - got
        assert not lost, f"{language.code}: {sorted(lost)} missing from the translation of {message.id!r}"
        if "%(" in message.id:
            values = dict.fromkeys(re.findall(r"%\((\w+)\)s", message.id), "1")
            assert message.string % values


def test_languages_and_their_codes():
    codes = [language.code for language in LANGUAGES]
    assert codes == ["en", "de", "fr", "es", "pt", "ja", "zh-Hans", "ar"]
    assert [language.code for language in LANGUAGES if language.direction == "rtl"] == ["ar"]
    assert find_language("ZH-hans").code == "zh-Hans" and find_language("xx") is None
    for language in LANGUAGES:
        assert catalog_path(language).is_file()


def identifiers_only(document: dict) -> dict:
    """The document with every text for people blanked: what must be the same in every language."""
    return translate_document(document, lambda text: "")


@pytest.mark.parametrize("language", LANGUAGES[1:], ids=lambda language: language.code)
def test_translated_documents_keep_every_identifier(language):
    english = build_document(300)
    translated = translate_document(english, Catalogs().gettext(language))
    assert identifiers_only(translated) == identifiers_only(english)
    assert list(translated["paths"]) == list(english["paths"])
    assert translated["components"]["parameters"].keys() == english["components"]["parameters"].keys()
    for name, parameter in english["components"]["parameters"].items():
        assert translated["components"]["parameters"][name]["name"] == parameter["name"]
        assert translated["components"]["parameters"][name]["schema"] == parameter["schema"]
    for name, schema in english["components"]["schemas"].items():
        assert translated["components"]["schemas"][name].get("properties", {}).keys() == schema.get("properties", {}).keys()
    # and it is a translation: nearly every text differs from the English one
    pairs = list(zip(document_texts(english), document_texts(translated)))
    changed = [english_text for (_, english_text), (_, text) in pairs if text != english_text]
    assert len(changed) >= 0.9 * len(pairs)
