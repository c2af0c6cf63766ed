"""Datasette's introspection pages, without local paths or plugin settings.

Datasette shows its whole metadata at ``/-/metadata``, plugin settings
included (``qsite serve`` passes the config and database paths as the
plugin's settings), each database's file path at ``/-/databases``, and its
asyncio tasks, with the source paths of the code they run, at
``/-/threads``. None of that is anyone's business but the operator's.
These routes answer the same URLs (``.json`` and HTML) with the same data
less those fields; plugin routes come before Datasette's own.
"""

from __future__ import annotations

from datasette.views.special import JsonDataView


def without_plugins(metadata):
    """``metadata`` with every ``plugins`` block removed, at any depth."""
    if isinstance(metadata, dict):
        return {key: without_plugins(value) for key, value in metadata.items() if key != "plugins"}
    if isinstance(metadata, list):
        return [without_plugins(value) for value in metadata]
    return metadata


def public_databases(datasette) -> list[dict]:
    """``/-/databases`` without each database's file path."""
    return [{key: value for key, value in database.items() if key != "path"} for database in datasette._connected_databases()]


def public_threads(datasette) -> dict:
    """``/-/threads`` without the asyncio tasks (their text names source files)."""
    return {key: value for key, value in datasette._threads().items() if key != "tasks"}


def routes(datasette) -> list[tuple[str, object]]:
    """``(regex, view)`` for each page shown here, for ``register_routes``."""
    pages = {
        "metadata": lambda: without_plugins(datasette.metadata()),
        "databases": lambda: public_databases(datasette),
        "threads": lambda: public_threads(datasette),
    }
    return [
        (rf"^/-/{name}(\.(?P<format>json))?$", JsonDataView.as_view(datasette, f"{name}.json", data))
        for name, data in pages.items()
    ]
