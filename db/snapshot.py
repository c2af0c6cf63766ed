"""What a published snapshot is: its name, the ``latest.json`` pointer, and the checks a copy must pass.

Shared by the writer, which publishes snapshots (:mod:`qsite.pipeline.ops.publish`), and
the replicas, which follow them (:mod:`qsite.service.replica.follow`); both check a file with
:func:`check_file` before they trust it, so "a snapshot that checks out" means
the same on both sides. Standard library only (and the schema's migration list).

A snapshot is a whole SQLite file, never changed once published, named after
what is in it: ``site-v<data version>-<first 16 hex digits of its SHA-256>.db``.
The *data version* is the sum of the ``data_versions`` counters: every
transaction that changes served data bumps one of them, so the sum grows with
every change and two snapshots with the same sum hold the same data.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from dataclasses import asdict, dataclass
from pathlib import Path

from qsite.db.migrations import migrations
from qsite.db.model import is_stored_time

#: The pointer object at the store's root: the one snapshot replicas serve.
POINTER = "latest.json"
#: The first 16 bytes of every SQLite database file.
SQLITE_MAGIC = b"SQLite format 3\x00"
#: ``site-v00000042-0123456789abcdef.db``
NAME_PATTERN = re.compile(r"^site-v(\d{8,})-([0-9a-f]{16})\.db$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
#: Bytes read at a time when hashing or copying a snapshot.
CHUNK = 1024 * 1024


def _known_schema() -> tuple[str, ...]:
    import sqlite_utils

    return tuple(migration.name for migration in migrations.pending(sqlite_utils.Database(memory=True)))


#: The migrations this code knows, in order; a snapshot's schema version is how many of them it has applied.
KNOWN_MIGRATIONS = _known_schema()
SCHEMA_VERSION = len(KNOWN_MIGRATIONS)


class SnapshotError(Exception):
    """A file or pointer that must not be served or trusted; the message says why, in one line."""


#: The kinds of ingest a pointer's heartbeat reports.
INGEST_KINDS = ("news", "site")


def _valid_ingests(value) -> bool:
    if value is None:
        return True
    if not isinstance(value, dict) or not set(value) <= set(INGEST_KINDS):
        return False
    for run in value.values():
        if run is None:
            continue
        if not isinstance(run, dict) or not isinstance(run.get("status"), str):
            return False
        for key in ("last_run_at", "last_success_at"):
            if run.get(key) is not None and not (isinstance(run[key], str) and is_stored_time(run[key])):
                return False
    return True


@dataclass(frozen=True)
class Pointer:
    """The content of ``latest.json``: which snapshot is current, and what to check it against.

    Besides the snapshot, the writer's heartbeat: ``heartbeat_at`` (when a publish
    last wrote the pointer, with or without a new snapshot) and ``ingests``
    (per kind: ``status``, ``last_run_at`` and ``last_success_at`` of the writer's
    latest runs then), so replicas judge their health by the writer's last ingest
    rather than by the last change of data. ``epoch`` counts the explicit
    rollbacks; ``rolled_back_from`` is the data version the last one replaced.
    Pointers are ordered by :attr:`order`: a publish never replaces a pointer with
    a lower one, and a replica never swaps to one. Pointers without these fields
    (an older qsite's) read as epoch 0 with no heartbeat; older replicas ignore them.
    """

    file: str
    sha256: str
    data_version: int
    published_at: str
    bytes: int
    schema_version: int
    epoch: int = 0
    rolled_back_from: int | None = None
    heartbeat_at: str | None = None
    ingests: dict | None = None

    @property
    def order(self) -> tuple[int, int]:
        """``(epoch, data_version)``: what only grows, except through an explicit rollback (which raises the epoch)."""
        return (self.epoch, self.data_version)

    def to_json(self) -> bytes:
        return json.dumps(asdict(self), indent=2, sort_keys=True).encode() + b"\n"

    @classmethod
    def from_json(cls, raw: bytes) -> "Pointer":
        """Parse and validate a pointer; :class:`SnapshotError` names the first bad field."""
        try:
            data = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as exc:
            raise SnapshotError(f"{POINTER} is not JSON: {exc}") from None
        if not isinstance(data, dict):
            raise SnapshotError(f"{POINTER} must be a JSON object")
        checks = {
            "file": lambda v: isinstance(v, str) and NAME_PATTERN.match(v),
            "sha256": lambda v: isinstance(v, str) and _SHA256.match(v),
            "data_version": lambda v: type(v) is int and v >= 0,
            "published_at": lambda v: isinstance(v, str) and is_stored_time(v),
            "bytes": lambda v: type(v) is int and v > 0,
            "schema_version": lambda v: type(v) is int and v >= 1,
        }
        optional = {
            "epoch": lambda v: type(v) is int and v >= 0,
            "rolled_back_from": lambda v: v is None or (type(v) is int and v >= 0),
            "heartbeat_at": lambda v: v is None or (isinstance(v, str) and is_stored_time(v)),
            "ingests": _valid_ingests,
        }
        for field, valid in checks.items():
            if not valid(data.get(field)):
                raise SnapshotError(f"{POINTER}: field {field!r} is missing or invalid (got {data.get(field)!r})")
        for field, valid in optional.items():
            if field in data and not valid(data[field]):
                raise SnapshotError(f"{POINTER}: field {field!r} is invalid (got {str(data[field])[:100]})")
        pointer = cls(**{field: data[field] for field in (*checks, *optional) if field in data})
        if pointer.file != snapshot_name(pointer.data_version, pointer.sha256):
            raise SnapshotError(f"{POINTER}: file {pointer.file!r} does not match its data_version and sha256")
        return pointer


def snapshot_name(data_version: int, sha256: str) -> str:
    """The immutable object name of a snapshot: its data version and the start of its hash."""
    return f"site-v{data_version:08d}-{sha256[:16]}.db"


def name_version(name: str) -> int | None:
    """The data version a snapshot name carries, or None for a name that is not a snapshot's."""
    match = NAME_PATTERN.match(name)
    return int(match.group(1)) if match else None


def file_sha256(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fp:
        while chunk := fp.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def data_version(conn: sqlite3.Connection) -> int:
    """The sum of the ``data_versions`` counters (0 before anything was ingested)."""
    try:
        return conn.execute("SELECT coalesce(sum(version), 0) FROM data_versions").fetchone()[0]
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return 0
        raise


def applied_migrations(conn: sqlite3.Connection) -> list[str]:
    try:
        rows = conn.execute(
            "SELECT name FROM _sqlite_migrations WHERE migration_set = ? ORDER BY rowid", [migrations.name]
        ).fetchall()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return []
        raise
    return [name for (name,) in rows]


def unknown_migrations(conn: sqlite3.Connection) -> list[str]:
    """The migrations ``conn``'s database has applied that this code does not know: a newer qsite's."""
    return [name for name in applied_migrations(conn) if name not in KNOWN_MIGRATIONS]


def pending_migrations(conn: sqlite3.Connection) -> list[str]:
    """This code's migrations ``conn``'s database has not applied yet: ``qsite migrate`` applies them."""
    applied = set(applied_migrations(conn))
    return [name for name in KNOWN_MIGRATIONS if name not in applied]


@dataclass(frozen=True)
class FileCheck:
    """What :func:`check_file` found in a file that checks out."""

    data_version: int
    schema_version: int


def check_file(path: str | Path) -> FileCheck:
    """Check that ``path`` is a whole, sound qsite database this code can serve.

    The SQLite header, ``PRAGMA integrity_check``, and the schema of
    :data:`KNOWN_MIGRATIONS`, no newer and no older: a replica does not migrate what it
    serves, and this qsite's queries read tables an older schema lacks. The file is opened read-only and immutable, so
    checking never writes beside it.

    :raises SnapshotError: naming what is wrong.
    """
    path = Path(path)
    try:
        with open(path, "rb") as fp:
            if fp.read(len(SQLITE_MAGIC)) != SQLITE_MAGIC:
                raise SnapshotError(f"{path.name} is not an SQLite database")
    except OSError as exc:
        raise SnapshotError(f"{path.name} cannot be read: {exc}") from None
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?immutable=1", uri=True)
    except sqlite3.Error as exc:
        raise SnapshotError(f"{path.name} cannot be opened: {exc}") from None
    try:
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check(5)")]
        if problems != ["ok"]:
            raise SnapshotError(f"{path.name} fails the integrity check: {'; '.join(problems)[:300]}")
        applied = applied_migrations(conn)
        if not applied:
            raise SnapshotError(f"{path.name} has no qsite schema")
        unknown = unknown_migrations(conn)
        if unknown or len(applied) > SCHEMA_VERSION:
            raise SnapshotError(
                f"{path.name} has schema version {len(applied)} ({', '.join(unknown) or 'unknown migrations'}), "
                f"newer than this qsite knows ({SCHEMA_VERSION}); upgrade this qsite"
            )
        if len(applied) < SCHEMA_VERSION:  # the queries of this qsite read tables it does not have yet
            raise SnapshotError(
                f"{path.name} has schema version {len(applied)}, older than this qsite's ({SCHEMA_VERSION}); "
                "publish again with a writer of this qsite (docs/operating.md, upgrading: the writer first)"
            )
        return FileCheck(data_version(conn), len(applied))
    except sqlite3.DatabaseError as exc:  # a damaged file fails here rather than in integrity_check
        raise SnapshotError(f"{path.name} is not a sound SQLite database: {exc}") from None
    finally:
        conn.close()


def verify_download(path: str | Path, pointer: Pointer) -> FileCheck:
    """Check a downloaded copy against its pointer: size, SHA-256, then :func:`check_file`.

    :raises SnapshotError: for a truncated or altered download, or a file that does not check out.
    """
    size = Path(path).stat().st_size
    if size != pointer.bytes:
        raise SnapshotError(f"{pointer.file}: {size} bytes downloaded, the pointer says {pointer.bytes} (truncated?)")
    digest = file_sha256(path)
    if digest != pointer.sha256:
        raise SnapshotError(f"{pointer.file}: SHA-256 {digest[:16]}… does not match the pointer's {pointer.sha256[:16]}…")
    found = check_file(path)
    if found.data_version != pointer.data_version:
        raise SnapshotError(f"{pointer.file}: holds data version {found.data_version}, the pointer says {pointer.data_version}")
    return found
