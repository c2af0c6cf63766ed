"""Datasette's introspection pages, without local paths or plugin settings.

Datasette shows its whole metadata at ``/-/metadata`` (0.65) and its whole
configuration at ``/-/config`` (1.0), plugin settings included (``qsite
serve`` passes the config and database paths as the plugin's settings), each
database's file path at ``/-/databases``, and its asyncio tasks, with the
source paths of the code they run, at ``/-/threads``. None of that is anyone's
business but the operator's. These routes answer the same URLs (``.json`` and
HTML) with the same data less those fields, built from public attributes;
plugin routes come before Datasette's own. Only on ``qsite serve``'s own server: as a
plugin in someone else's Datasette these pages are the deployer's, left as Datasette makes them.
"""

from __future__ import annotations

import threading

from qsite.service.compat import instance_config, instance_metadata, json_data_view


def without_plugins(metadata):
    """``metadata`` with every ``plugins`` block removed, at any depth."""
    if isinstance(metadata, dict):
        return {key: without_plugins(value) for key, value in metadata.items() if key != "plugins"}
    if isinstance(metadata, list):
        return [without_plugins(value) for value in metadata]
    return metadata


def public_databases(datasette) -> list[dict]:
    """``/-/databases`` without each database's file path; like Datasette's own, never ``_internal``
    (its catalog of the others: on 0.65 it is one of ``datasette.databases``)."""
    return [
        {
            "name": database.name,
            "route": database.route,
            "size": database.size,
            "is_mutable": database.is_mutable,
            "is_memory": database.is_memory,
            "hash": database.hash,
        }
        for name, database in datasette.databases.items()
        if name != "_internal"
    ]


def public_threads(datasette) -> dict:
    """``/-/threads`` without the asyncio tasks (their text names source files)."""
    if datasette.setting("num_sql_threads") == 0:
        return {"num_threads": 0, "threads": []}
    threads = threading.enumerate()
    return {
        "num_threads": len(threads),
        "threads": [{"name": thread.name, "ident": thread.ident, "daemon": thread.daemon} for thread in threads],
    }


def public_metadata(datasette):
    """``/-/metadata`` without plugin settings (a coroutine on Datasette 1.0: :func:`qsite.service.compat.instance_metadata`)."""
    metadata = instance_metadata(datasette)
    if isinstance(metadata, dict):
        return without_plugins(metadata)

    async def gathered():
        return without_plugins(await metadata)

    return gathered()


def routes(datasette) -> list[tuple[str, object]]:
    """``(regex, view)`` for each page shown here, for ``register_routes``."""
    pages = {
        "databases": lambda: public_databases(datasette),
        "threads": lambda: public_threads(datasette),
    }
    pages["metadata"] = lambda: public_metadata(datasette)
    if instance_config(datasette) is not None:
        pages["config"] = lambda: without_plugins(instance_config(datasette))
    return [
        (rf"^/-/{name}(\.(?P<format>json))?$", json_data_view(datasette, f"{name}.json", data))
        for name, data in pages.items()
    ]
