"""Fill the source language's catalog: every English text translates to itself.

``make i18n-update`` runs it on ``service/locales/en/LC_MESSAGES/qsite.po``
after merging new texts, so the English catalog is complete by construction
and the completeness test holds for it as for every other language.
"""

import sys

from babel.messages.pofile import read_po, write_po


def main(path: str) -> None:
    with open(path, "rb") as fp:
        catalog = read_po(fp)
    for message in catalog:
        if message.id:
            message.string = message.id
            message.flags.discard("fuzzy")
    with open(path, "wb") as fp:
        write_po(fp, catalog, width=0)


if __name__ == "__main__":
    main(sys.argv[1])
