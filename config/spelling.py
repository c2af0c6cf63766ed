"""Spellings a config may use for what it means: a tag in any case, and the key an unknown one was probably meant to be."""

from __future__ import annotations

import difflib
import typing

from pydantic import BaseModel

from qsite.db.model import TAGS


def canonical_tag(value):
    """A tag in any case (``science``) as the one it names (``Science``), as the API takes ``tag=``; anything else as it is."""
    if isinstance(value, str):
        return {tag.lower(): tag for tag in TAGS}.get(value.strip().lower(), value)
    return value


def did_you_mean(root: type[BaseModel], loc: tuple) -> str:
    """`` (did you mean 'x'?)`` for an unknown key at ``loc`` (pydantic's error location under ``root``)
    that is close to a key the model has there, else ``""``."""
    model: type[BaseModel] | None = root
    for part in loc[:-1]:
        if isinstance(part, int) or model is None:
            continue  # a list's index: the items' model is the field's
        field = model.model_fields.get(part)
        model = None
        if field is not None:
            for candidate in (field.annotation, *typing.get_args(field.annotation)):
                if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                    model = candidate
    if model is None or not isinstance(loc[-1], str):
        return ""
    known = [name for name in model.model_fields if name != "path"]  # path: bookkeeping, never a key
    guesses = difflib.get_close_matches(loc[-1], known, n=2) or [name for name in known if name.lower() == loc[-1].lower()]
    return " (did you mean " + " or ".join(repr(guess) for guess in guesses) + "?)" if guesses else ""
