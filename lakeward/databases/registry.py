"""The instances of a data dir: one JSON file, replaced whole, under a lock.

``<data dir>/databases/instances.json`` holds every instance's record (never a
password: those are in the secrets store). Writers hold an exclusive ``flock``
on ``databases/.lock`` for the whole operation, so that two commands cannot
create the same name or restart the same server at once; readers need no lock
because the file is only ever replaced by a rename.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from lakeward.databases.base import Endpoint
from lakeward.errors import ResourceNotFound, StackError

STATUSES = ("creating", "available", "modifying", "stopped", "deleting", "failed")


@dataclass
class InstanceRecord:
    """What the registry keeps of an instance."""

    name: str
    engine: str  # as asked for: postgres, mysql, mariadb
    engine_version: str  # the major version (15, 10.11)
    server: str  # what really runs, e.g. "MariaDB 10.11.19"
    instance_class: str | None  # None for a registered server: its resources are not ours
    host: str
    port: int
    local: bool
    status: str
    master_username: str
    secret: str  # name of the master credentials in the secrets store
    created: str  # ISO 8601, UTC
    pending: dict[str, str] = field(default_factory=dict)
    pending_since: str | None = None
    status_reason: str = ""


@dataclass(frozen=True)
class InstanceInfo:
    """What ``describe`` shows of an instance; never its password."""

    name: str
    engine: str
    engine_version: str
    server: str  # what really runs, e.g. "MariaDB 10.11.19" for a mysql instance
    instance_class: str | None  # None: a registered server, its resources are not managed
    endpoint: Endpoint
    status: str
    status_reason: str
    pending_modifications: dict[str, str]
    maintenance_window: str
    next_maintenance: datetime | None  # when the pending modifications will be applied
    local: bool
    master_username: str
    created: datetime
    log: Path | None


class Registry:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.path = directory / "instances.json"
        self._depth = 0
        self._lock_file: int | None = None

    @contextlib.contextmanager
    def locked(self, blocking: bool = True) -> Iterator[bool]:
        """Hold the data dir's instance lock (re-entrant); yields False if busy and not blocking."""
        if self._depth:
            self._depth += 1
            try:
                yield True
            finally:
                self._depth -= 1
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.directory / ".lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
            except BlockingIOError:
                yield False
                return
            self._depth = 1
            try:
                yield True
            finally:
                self._depth = 0
        finally:
            os.close(fd)  # closing releases the lock

    def load(self) -> dict[str, InstanceRecord]:
        try:
            data: dict[str, Any] = json.loads(self.path.read_text(encoding="utf-8"))
            return {n: InstanceRecord(**r) for n, r in data["instances"].items()}
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise StackError(f"{self.path}: the instance registry is unreadable ({exc})") from None

    def get(self, name: str) -> InstanceRecord:
        record = self.load().get(name)
        if record is None:
            raise ResourceNotFound(f"database instance {name} not found")
        return record

    def save(self, record: InstanceRecord) -> None:
        with self.locked():
            records = self.load()
            records[record.name] = record
            self._write(records)

    def remove(self, name: str) -> None:
        with self.locked():
            records = self.load()
            records.pop(name, None)
            self._write(records)

    def _write(self, records: dict[str, InstanceRecord]) -> None:
        data = {"instances": {n: asdict(r) for n, r in sorted(records.items())}}
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2)
            f.flush()
            os.fsync(f.fileno())
        tmp.replace(self.path)
