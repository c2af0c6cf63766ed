"""Interface languages: the message catalogs, and the interface description in each language.

The English texts are written where the interface is described (the OpenAPI
document built by :mod:`qsite.service.describe.openapi` from :mod:`qsite.service.datasette.handler` and
:mod:`qsite.service.http.problems`, and the documentation page's template); their
translations live in gettext catalogs, ``service/locales/<dir>/LC_MESSAGES/qsite.po``,
keyed by the English text itself (``make messages`` extracts and updates them).

The service reads the ``.po`` files directly with Babel when it starts, so there
is no compiled ``.mo`` to build, ship or let go stale; ``make i18n-compile``
still compiles them, as gettext's own syntax check. Fuzzy entries are not used:
a text whose English changed stays English until a translator has looked at it.

Only human-readable texts are translated (``title``, ``summary``,
``description`` and the usage terms); identifiers never are: paths, parameter
and field names, tag values, problem types, examples, enums and constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator

from babel.messages.pofile import read_po

#: The catalogs' gettext domain and folder.
DOMAIN = "qsite"
LOCALES_DIR = Path(__file__).resolve().parent / "locales"


@dataclass(frozen=True)
class Language:
    """An interface language.

    :param code: its BCP 47 tag, as ``?lang=`` takes it and ``Content-Language`` sends it.
    :param name: its name in itself, for a language switcher.
    :param direction: ``ltr`` or ``rtl`` (the HTML ``dir``).
    """

    code: str
    name: str
    direction: str = "ltr"

    @property
    def catalog_dir(self) -> str:
        """The catalog's folder: a gettext locale name (``zh_Hans`` for ``zh-Hans``)."""
        return self.code.replace("-", "_")


#: Every interface language, the source language first.
LANGUAGES: tuple[Language, ...] = (
    Language("en", "English"),
    Language("de", "Deutsch"),
    Language("fr", "Français"),
    Language("es", "Español"),
    Language("pt", "Português"),
    Language("ja", "日本語"),
    Language("zh-Hans", "简体中文"),
    Language("ar", "العربية", "rtl"),
)
DEFAULT_LANGUAGE = LANGUAGES[0]
_BY_CODE = {language.code.casefold(): language for language in LANGUAGES}


def find_language(code: str) -> Language | None:
    """The language with this tag, ignoring letter case as BCP 47 does (``zh-hans``), or None."""
    return _BY_CODE.get(code.casefold())


def catalog_path(language: Language) -> Path:
    return LOCALES_DIR / language.catalog_dir / "LC_MESSAGES" / f"{DOMAIN}.po"


Gettext = Callable[[str], str]


def load_catalog(language: Language) -> dict[str, str]:
    """``{English text: translation}`` from the language's ``.po``, without fuzzy or empty entries."""
    with open(catalog_path(language), "rb") as fp:
        catalog = read_po(fp, locale=language.catalog_dir, domain=DOMAIN)
    return {
        message.id: message.string
        for message in catalog
        if message.id and isinstance(message.id, str) and message.string and not message.fuzzy
    }


class Catalogs:
    """The translations of every language, read once."""

    def __init__(self, languages: tuple[Language, ...] = LANGUAGES):
        self.messages = {language.code: load_catalog(language) for language in languages}

    def gettext(self, language: Language) -> Gettext:
        """A function from an English text to its translation (the English text when there is none)."""
        messages = self.messages.get(language.code, {})
        return lambda text: messages.get(text, text)


#: Keys whose string values are text for people; everything else is left as it is.
TEXT_KEYS = frozenset({"title", "summary", "description", "x-usage-terms"})
#: Values that are data, not description: never looked into.
DATA_KEYS = frozenset({"enum", "const", "default", "example", "examples", "pattern"})


def _map_texts(node, change: Callable[[str, str], str], pointer: str):
    if isinstance(node, dict):
        mapped = {}
        for key, value in node.items():
            where = f"{pointer}/{str(key).replace('~', '~0').replace('/', '~1')}"
            if key in TEXT_KEYS and isinstance(value, str):
                mapped[key] = change(where, value)
            elif key in DATA_KEYS:
                mapped[key] = value
            else:
                mapped[key] = _map_texts(value, change, where)
        return mapped
    if isinstance(node, list):
        return [_map_texts(value, change, f"{pointer}/{index}") for index, value in enumerate(node)]
    return node


def document_texts(document: dict) -> Iterator[tuple[str, str]]:
    """``(JSON pointer, text)`` of every text for people in an OpenAPI document, in document order."""
    found: list[tuple[str, str]] = []
    _map_texts(document, lambda pointer, text: found.append((pointer, text)) or text, "#")
    return iter(found)


def translate_document(document: dict, gettext: Gettext) -> dict:
    """A copy of ``document`` with every text for people translated, and nothing else changed."""
    return _map_texts(document, lambda _pointer, text: gettext(text), "#")
