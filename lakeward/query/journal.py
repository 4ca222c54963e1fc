"""Publishing written files so that no reader sees half a write.

Readers list a table's files once per query and read exactly those. A writer stages its
files where no reader looks, then publishes them under the table's lock held exclusively,
while a reader lists under the same lock held shared: a listing sees all of a write's files
or none of them. The lock is a file lock in the stack's state directory, so it holds
across every process of the stack (server workers, the CLI); it is keyed by the table's
location, as both sides know it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import logging
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TYPE_CHECKING

from lakeward.errors import (
    InvalidRequest,
    LakewardError,
    ObjectNotFound,
    QueryCancelled,
    QueryFailed,
    TableNotFound,
)
from lakeward.query.model import TableRef
from lakeward.storage.paths import catalog_uri, lake_place, public_uri, same_place

if TYPE_CHECKING:
    from lakeward.config import Settings
    from lakeward.query.catalogs.base import Catalog
    from lakeward.query.engines.base import WrittenFile
    from lakeward.query.store import Store
    from lakeward.storage import ObjectInfo, Storage

log = logging.getLogger(__name__)


def _locks(settings: Settings) -> Path:
    return settings.data_dir / "run" / "table-locks"


@contextmanager
def table_lock(settings: Settings, location: str, *, shared: bool) -> Iterator[None]:
    """Hold the lock of the table at ``location`` (shared to list, exclusive to publish)."""
    key = catalog_uri(settings, location).rstrip("/")  # one lock whatever the spelling
    directory = _locks(settings)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.lock"
    while True:
        handle = open(path, "a")  # noqa: SIM115 - held past this block, closed below
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        if _still_at(handle, path):
            break
        # ``sweep_table_locks`` removed the file while this process waited on it: the lock
        # to take is that of the file now at the path.
        handle.close()
    try:
        yield
    finally:
        fcntl.flock(handle, fcntl.LOCK_UN)
        handle.close()


def sweep_table_locks(settings: Settings) -> int:
    """Remove the lock files no process holds (one is made per table ever written, and
    would pile up); the number removed. Safe beside ``table_lock``: a file is removed
    only under its exclusive lock, and a waiter that then gets it takes the new one."""
    removed = 0
    for path in _locks(settings).glob("*.lock"):
        try:
            handle = open(path, "a")  # noqa: SIM115 - closed below
        except OSError:
            continue
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue  # held: in use
        try:
            if _still_at(handle, path):
                path.unlink(missing_ok=True)
                removed += 1
        finally:
            handle.close()  # the lock goes with it
    return removed


def _still_at(handle: IO[str], path: Path) -> bool:
    """Whether the open ``handle`` is still the file at ``path`` (not swept meanwhile)."""
    try:
        return os.fstat(handle.fileno()).st_ino == os.stat(path).st_ino
    except FileNotFoundError:
        return False


PAUSE_FOR_TESTS = "LAKEWARD_TEST_PAUSE_WRITE"
"""For tests only: seconds a write waits once its files are published and its table or
partitions registered, before it commits (a test kills the process in that moment)."""

PAUSE_AFTER_COMMIT = "LAKEWARD_TEST_PAUSE_COMMITTED"
"""For tests only: seconds a write waits once committed, before its execution is saved
SUCCEEDED (a test kills the process in that moment)."""

ROLLED_BACK_ELSEWHERE = (
    "the write was rolled back by another server process, which took this one for dead; "
    "run it again"
)


def _never() -> bool:
    return False  # a committed write is past stopping: its statement is done


def _pause_for_tests(variable: str, what: str, cancelled: Callable[[], bool]) -> None:
    pause = os.environ.get(variable)
    if pause:
        log.warning("%s pauses %s s (tests)", what, pause)
        until = time.monotonic() + float(pause)
        while time.monotonic() < until and not cancelled():
            time.sleep(0.05)


class Write:
    """One statement's write: staged, published, registered, then committed or rolled back.

    The write is journaled in the query service's state (``query_writes``) from its start
    until its execution is saved SUCCEEDED: what it is about to publish or register is
    recorded before it does it, so that a process that finds the writer's process gone
    removes exactly that (``roll_back_orphans``). The journal's row is deleted in the
    transaction that saves SUCCEEDED (``Store.save_with_write``): whenever its process
    dies, a write is all there with its execution SUCCEEDED, or absent.
    """

    def __init__(
        self,
        settings: Settings,
        storage: Storage,
        store: Store,
        execution_id: str,
        owner: str,
        location: str,
        in_lake: bool = False,
    ) -> None:
        self.settings, self.storage, self.store = settings, storage, store
        self.execution_id = execution_id
        self.location = location.rstrip("/")
        self.staging = settings.data_dir / "query" / "staging" / execution_id
        # The staging directory's s3:// name, when it is in the lake.
        self.staging_name: str | None = None
        lake_dir = storage.local_dir
        place = lake_place(settings, self.location)
        if in_lake and lake_dir is not None and place is not None:
            # A folder of the target's own that readers skip (its name starts with '.'),
            # as Hive's .hive-staging folders: a cluster's executors write into it by
            # its s3:// name, and publishing takes the files from it.
            bucket, key = place
            folder = f"{key}/.lakeward-staging-{execution_id}".lstrip("/")
            self.staging = lake_dir / bucket / folder
            self.staging_name = public_uri(settings, bucket, folder)
        self.objects: list[tuple[str, str]] = []
        self.created: tuple[Catalog, TableRef] | None = None
        # Journaled before it is made: a process killed in between leaves nothing that
        # ``roll_back_orphans`` would not know of.
        store.begin_write(execution_id, owner, str(self.staging), self.location)
        shutil.rmtree(self.staging, ignore_errors=True)
        self.staging.mkdir(parents=True)

    def publish(
        self, files: list[WrittenFile], places: list[str] | None = None
    ) -> list[ObjectInfo]:
        """Put the staged files in the lake, all visible to readers at once.

        Each file goes under the location, at its relative path, or to its own place
        (``places``: a URI per file; an INSERT's file of a partition registered elsewhere).
        """
        uris = places or [f"{self.location}/{f.path}" for f in files]
        objects = []
        for uri in uris:
            place = lake_place(self.settings, uri)
            if place is None or not place[1]:  # checked by the statement before it wrote
                raise InvalidRequest(f"{uri} is not in the lake")
            objects.append(place)
        self.store.note_write(self.execution_id, objects=objects)
        self.objects = objects
        published = []
        with table_lock(self.settings, self.location, shared=False):
            for file, (bucket, key) in zip(files, objects, strict=True):
                with open(self.staging / file.path, "rb") as data:
                    published.append(self.storage.put(bucket, key, data))
        return published

    def creating(self, catalog: Catalog, ref: TableRef) -> None:
        """Say, before creating it, that the write registers the table ``ref``."""
        self.store.note_write(self.execution_id, created_table=str(ref))
        self.created = (catalog, ref)

    def registered(self, cancelled: Callable[[], bool]) -> None:
        """Files and metadata are in place; only the commit is left, unless stopped now."""
        _pause_for_tests(PAUSE_FOR_TESTS, f"write {self.execution_id}", cancelled)
        if cancelled():
            raise QueryCancelled("the query was cancelled")

    def commit(self) -> None:
        """The statement is done with the write; its execution's SUCCEEDED ends it."""
        shutil.rmtree(self.staging, ignore_errors=True)
        if not self.store.write_in_flight(self.execution_id):
            raise QueryFailed(ROLLED_BACK_ELSEWHERE)
        _pause_for_tests(PAUSE_AFTER_COMMIT, f"committed write {self.execution_id}", _never)

    def roll_back(self) -> None:
        """Remove what the write published and the table it created; forget it."""
        try:
            _undo(self.settings, self.storage, self.location, self.objects, self.created)
        finally:
            shutil.rmtree(self.staging, ignore_errors=True)
            self.store.end_write(self.execution_id)


def _undo(
    settings: Settings,
    storage: Storage,
    location: str,
    objects: list[tuple[str, str]],
    created: tuple[Catalog, TableRef] | None,
) -> None:
    # The table first: a reader that still finds it lists no files of the write.
    if created is not None:
        client, ref = created
        try:
            table = client.load_table(ref.database, ref.table)
        except TableNotFound:
            table = None
        # Only the table this write made: one made meanwhile by someone else (the
        # create then failed) is elsewhere, as every CTAS writes its own location.
        if table is not None and same_place(settings, table.location, location):
            with contextlib.suppress(TableNotFound):  # dropped meanwhile by another process
                client.drop_table(ref.database, ref.table)
    with table_lock(settings, location, shared=False):
        for bucket, key in objects:
            with contextlib.suppress(ObjectNotFound):  # not published when the write stopped
                storage.delete(bucket, key)


class Journal:
    """Where a process's writes are journaled: ``write`` runs one, the protocol around it."""

    def __init__(self, settings: Settings, storage: Storage, store: Store, owner: str) -> None:
        self.settings, self.storage, self.store = settings, storage, store
        self.owner = owner  # the process whose writes these are (presence.py's id)
        self._committed: dict[str, Write] = {}  # by execution, until it ends

    @contextmanager
    def write(
        self,
        execution_id: str,
        location: str,
        cancelled: Callable[[], bool],
        in_lake: bool = False,
    ) -> Iterator[Write]:
        """One statement's write to ``location``, staged in ``Write.staging`` (in the lake
        with ``in_lake``, for an engine whose writers run elsewhere): the statement
        publishes its files and registers its table or partitions inside; leaving the
        block commits, unless the query was stopped; any failure rolls everything back.
        A committed write stays journaled until its execution ends (``committed``)."""
        write = Write(
            self.settings, self.storage, self.store, execution_id, self.owner, location, in_lake
        )
        try:
            yield write
            write.registered(cancelled)
            write.commit()
        except BaseException:
            write.roll_back()
            raise
        self._committed[execution_id] = write

    def committed(self, execution_id: str) -> Write | None:
        """The committed write of ``execution_id``, now ending: the caller saves the
        execution SUCCEEDED with it (``Store.save_with_write``) or rolls it back."""
        return self._committed.pop(execution_id, None)

    def roll_back_orphans(self, catalog_of: Callable[[str], Catalog]) -> list[str]:
        """Roll back the writes of processes that are gone; the ids of their executions."""
        undone = []
        for write in self.store.orphan_writes():
            created = None
            if write["created_table"]:
                catalog, database, table = write["created_table"].split(".")
                ref = TableRef(catalog, database, table)
                try:
                    created = (catalog_of(catalog), ref)
                except LakewardError:
                    log.warning("cannot reach catalog %s to drop %s", catalog, ref)
            try:
                _undo(self.settings, self.storage, write["location"], write["objects"], created)
            except (LakewardError, OSError):
                log.exception("rolling back the write of %s failed", write["execution_id"])
                continue
            shutil.rmtree(write["staging"], ignore_errors=True)
            self.store.end_write(write["execution_id"])
            undone.append(write["execution_id"])
            log.warning("rolled back the write of %s (its process is gone)", write["execution_id"])
        return undone
