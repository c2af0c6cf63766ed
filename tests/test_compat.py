"""The internals service/compat.py relies on are still there, and still mean what it assumes.

Every private Datasette or granian name qsite uses is in service/compat.py;
these tests fail loudly when a release changes one, naming it, rather than
letting the service fail at its first request.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import sqlite3

import granian.log
from datasette.app import Datasette
from granian.server import Server

from qsite.service import compat
from qsite.service.serve.runner import logging_config


def test_the_datasette_line_is_told_by_its_permission_api():
    assert compat.datasette_1() == hasattr(Datasette, "allowed")
    import datasette.version

    assert datasette.version.__version__.startswith("1." if compat.datasette_1() else "0.")


def test_datasette_065_internals_are_there():
    if compat.datasette_1():
        assert hasattr(Datasette, "get_query"), "Datasette 1.0: stored queries (get_query) expected"
        return
    # _SnapshotDatabase065 prepares its connections as Datasette does
    assert callable(getattr(Datasette, "_prepare_connection", None)), "Datasette._prepare_connection is gone: see service/compat.py"
    assert callable(getattr(Datasette, "metadata", None)), "Datasette.metadata() is gone: see service/compat.py"
    assert callable(getattr(Datasette, "get_canned_queries", None))


def test_a_snapshot_database_reads_its_own_file_under_a_shared_name(tmp_path):
    """Two databases of one name over two files, on one executor thread: each reads its own file.

    Datasette 0.65 keys a thread's connection by name (service/compat.py makes
    it per instance); if a release changes how connections are kept, this fails.
    """
    for name in ("old", "new"):
        conn = sqlite3.connect(tmp_path / f"{name}.db")
        conn.execute("create table which (name text)")
        conn.execute("insert into which values (?)", [name])
        conn.commit()
        conn.close()
    datasette = Datasette([], settings={"num_sql_threads": 1})

    async def read():
        old = compat.snapshot_database(datasette, tmp_path / "old.db")
        compat.replace_database(datasette, "site", old)
        first = (await old.execute("select name from which")).first()[0]
        new = compat.snapshot_database(datasette, tmp_path / "new.db")
        compat.replace_database(datasette, "site", new)
        assert datasette.get_database("site") is new
        second = (await new.execute("select name from which")).first()[0]
        again = (await old.execute("select name from which")).first()[0]  # a request still on the old one
        return first, second, again

    assert asyncio.run(read()) == ("old", "new", "old")


def test_a_snapshot_database_takes_the_hash_it_is_given_instead_of_reading_the_file(tmp_path):
    """Datasette's ``Database.hash`` returns ``cached_hash`` when set (service/compat.py); if a release
    stops honouring it, Datasette would hash every swapped-in snapshot on the event loop again."""
    import hashlib

    path = tmp_path / "snapshot.db"
    sqlite3.connect(path).close()
    # a value no file hashes to: were the file read, its own SHA-256 would show
    assert compat.snapshot_database(Datasette([]), path, sha256="ab" * 32).hash == "ab" * 32
    assert compat.snapshot_database(Datasette([]), path).hash == hashlib.sha256(path.read_bytes()).hexdigest()


def test_granian_internals_are_there():
    assert granian.log.logger.name == compat.GRANIAN_LOGGER, "granian's logger was renamed: see service/compat.py"
    assert compat.GRANIAN_LOGGER in logging_config(logging.INFO)["loggers"]
    assert "target_loader" in inspect.signature(Server.serve).parameters, "granian Server.serve(target_loader=) is gone"


def test_the_config_split_is_loaded_the_same_way_on_both_lines():
    metadata = {"title": "t", "databases": {"site": {"description": "d"}}}
    config = {"settings": {"sql_time_limit_ms": 500}, "databases": {"site": {"queries": {"q": {"sql": "select 1"}}}}}
    kwargs = compat.datasette_kwargs(metadata, config)
    assert kwargs["settings"] == {"sql_time_limit_ms": 500}
    datasette = Datasette([], **kwargs)

    async def queries():
        return await compat.canned_query_sql(datasette, "site", ["q", "nope"])

    datasette.add_memory_database("site")
    asyncio.run(datasette.invoke_startup())
    assert asyncio.run(queries()) == {"q": "select 1"}
    assert datasette.setting("sql_time_limit_ms") == 500


def test_add_to_histogram_does_what_as_many_observations_would():
    """prometheus-client's histogram internals (``_buckets``, ``_sum``) as qsite.service.compat uses them."""
    from prometheus_client import CollectorRegistry, Histogram

    from qsite.service.compat import add_to_histogram

    buckets = (0.001, 0.01, 0.1)
    added, observed = (Histogram(name, "h", ("endpoint",), buckets=buckets, registry=CollectorRegistry())
                       for name in ("added", "observed"))
    samples = (0.0005, 0.001, 0.005, 0.05, 5.0)
    for seconds in samples:
        observed.labels("x").observe(seconds)
    add_to_histogram(added.labels("x"), [2, 1, 1, 1], sum(samples))

    def values(histogram):
        return [(sample.name.split("_", 1)[1], sample.labels.get("le"), sample.value)
                for sample in next(iter(histogram.collect())).samples if not sample.name.endswith("_created")]

    assert values(added) == values(observed)
