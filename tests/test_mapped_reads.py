"""The API's reads map the database file (``api.mmap_size``) and still see exactly what the writer committed.

A mapped read takes its pages from the system's page cache without a copy; the
risk a map brings is a file that changed size under it (a read past the end of
a shrunk file is a ``SIGBUS``, which no ``except`` catches). The model below is
a real writer connection growing and shrinking a real file (inserts of values
spanning overflow pages, deletes, ``VACUUM``, WAL checkpoints that truncate the
log) and the API's own :class:`~qsite.service.api.reader.Reader`, with the
default map, reading between them (a fresh read transaction, the held one, and
the threads): every fresh read sees the writer's last commit, value by value,
to the last byte of each. The invariant is stated in docs/invariants.md
("Reads and the writer").
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from qsite.config.model import ApiConfig
from qsite.service.api.reader import HOLD, Reader
from qsite.service.datasette.plugin import get_api
from tests.support.api_client import ApiClient, datasette_for_config

#: The map the API's readers use unless configured otherwise.
DEFAULT_MAP = ApiConfig().mmap_size
SOAK = bool(os.environ.get("QSITE_SOAK"))


def contents(conn: sqlite3.Connection) -> dict[int, tuple[int, str]]:
    """Each row's id, its value's length and its value's last character: the tail is read, overflow pages and all."""
    return {row_id: (length, last) for row_id, length, last in conn.execute("SELECT id, length(v), substr(v, -1) FROM t")}


def mapped(conn: sqlite3.Connection) -> int:
    return conn.execute("PRAGMA mmap_size").fetchone()[0]


class MappedReadsFollowTheWriter(RuleBasedStateMachine):
    @initialize(journal_mode=st.sampled_from(["wal", "delete"]))
    def start(self, journal_mode):
        self.folder = Path(tempfile.mkdtemp(prefix="qsite-mapped-reads-"))
        self.path = self.folder / "site.db"
        self.wal = journal_mode == "wal"
        # no busy wait: a TRUNCATE checkpoint would wait out a held read, which only the loop ends
        self.writer = sqlite3.connect(self.path, isolation_level=None, timeout=0)
        self.writer.execute(f"PRAGMA journal_mode = {journal_mode}")
        self.writer.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
        self.loop = asyncio.new_event_loop()
        self.reader = Reader(self.path, mmap_size=DEFAULT_MAP)
        #: What the writer committed: id -> (length, last character).
        self.model: dict[int, tuple[int, str]] = {}
        #: Every state the writer committed, in order (a held read may see one a little behind the last).
        self.committed = [{}]
        self.next_id = 1

    def teardown(self):
        if hasattr(self, "reader"):
            self.reader.close()
            self.writer.close()
            self.loop.close()
            shutil.rmtree(self.folder, ignore_errors=True)

    # -- the writer ------------------------------------------------------------------

    @rule(lengths=st.lists(st.integers(1, 30_000), min_size=1, max_size=12))
    def insert(self, lengths):
        self.writer.execute("BEGIN IMMEDIATE")
        for length in lengths:
            last = chr(ord("a") + self.next_id % 26)
            self.writer.execute("INSERT INTO t VALUES (?, ?)", (self.next_id, "x" * (length - 1) + last))
            self.model[self.next_id] = (length, last)
            self.next_id += 1
        self.writer.execute("COMMIT")
        self.committed.append(dict(self.model))

    @precondition(lambda self: self.model)
    @rule(keep_one_in=st.integers(1, 5))
    def delete(self, keep_one_in):
        doomed = [row_id for row_id in self.model if row_id % keep_one_in]
        self.writer.execute("BEGIN IMMEDIATE")
        self.writer.executemany("DELETE FROM t WHERE id = ?", [(row_id,) for row_id in doomed])
        self.writer.execute("COMMIT")
        for row_id in doomed:
            del self.model[row_id]
        self.committed.append(dict(self.model))

    @rule(idle_first=st.booleans())
    def vacuum(self, idle_first):
        """The file shrinks to what it holds; in WAL mode once a checkpoint copies the vacuumed pages back,
        which a held read puts off (busy) until the loop has turned past the hold."""
        if self.wal and idle_first:
            self.loop.run_until_complete(asyncio.sleep(HOLD * 1.5))  # review: outlasts the hold, a condition, not a race
        self.writer.execute("VACUUM")
        self.checkpoint()

    @rule()
    def checkpoint(self):
        if self.wal:
            self.writer.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()

    # -- the API's reads -------------------------------------------------------------

    @rule()
    def read_fresh(self):
        assert self.loop.run_until_complete(self.reader.fresh(contents)) == self.model

    @rule()
    def read_on_a_thread(self):
        assert self.loop.run_until_complete(self.reader.run(contents)) == self.model

    @rule()
    def read_held(self):
        """The held transaction may be up to its hold behind (WAL only); what it reads is a whole committed state all the same."""
        seen = self.loop.run_until_complete(self.reader.inline(contents))
        assert seen in self.committed if self.wal else seen == self.model

    @invariant()
    def the_reads_are_mapped(self):
        if hasattr(self, "reader"):
            assert 0 < self.loop.run_until_complete(self.reader.run(mapped)) <= DEFAULT_MAP  # SQLite caps it at its build's most


TestMappedReadsFollowTheWriter = MappedReadsFollowTheWriter.TestCase
TestMappedReadsFollowTheWriter.settings = settings(
    max_examples=300 if SOAK else 30, stateful_step_count=40, deadline=None
)


def test_the_api_maps_its_reads_and_datasettes_connections_stay_as_they_were(seeded_config):
    """A good neighbour: the map is on the API's own connections only, never on Datasette's."""
    client = ApiClient(datasette_for_config(seeded_config))
    try:
        assert client.get("/api/v1/stats").status_code == 200
        datasette = client.datasette
        api = get_api(datasette)
        assert client.loop.run_until_complete(api.reader.inline(mapped)) > 0
        assert client.loop.run_until_complete(api.reader.run(mapped)) > 0
        for database in datasette.databases.values():
            if database.is_memory:  # nothing to map
                continue
            assert client.loop.run_until_complete(database.execute("PRAGMA mmap_size")).first()[0] == 0
    finally:
        client.close()


def test_a_map_of_zero_reads_through_the_file_as_before(tmp_path):
    path = tmp_path / "site.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)")
    reader = Reader(path, mmap_size=0)
    try:
        assert asyncio.run(reader.inline(mapped)) == 0
    finally:
        reader.close()


@pytest.mark.parametrize("journal_mode", ["wal", "delete"])
def test_a_mapped_reader_reads_on_after_the_writer_shrinks_the_file(journal_mode):
    """The case the model is for, written out: the file is mapped whole, then shrinks to a tenth under the map."""
    machine = MappedReadsFollowTheWriter()
    try:
        machine.start(journal_mode=journal_mode)
        machine.insert(lengths=[20_000] * 50)
        machine.vacuum(idle_first=True)  # in WAL mode: the pages copied into the file
        machine.read_fresh()
        machine.read_on_a_thread()
        mapped_size = machine.path.stat().st_size
        machine.delete(keep_one_in=10)
        machine.vacuum(idle_first=True)
        assert machine.path.stat().st_size < mapped_size / 5
        machine.read_fresh()
        machine.read_on_a_thread()
        machine.read_held()
    finally:
        machine.teardown()
