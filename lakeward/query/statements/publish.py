"""Publishing written files so that no reader sees half a write.

Readers list a table's files once per query and read exactly those. A writer stages its
files where no reader looks, then publishes them under the table's lock held exclusively,
while a reader lists under the same lock held shared: a listing sees all of a write's files
or none of them. The lock is a file lock in the stack's state directory, so it holds
across every process of the stack (server workers, the CLI); it is keyed by the table's
location, as both sides know it.
"""

from __future__ import annotations

import fcntl
import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from lakeward.storage.paths import file_uri

if TYPE_CHECKING:
    from lakeward.config import Settings


@contextmanager
def table_lock(settings: Settings, location: str, *, shared: bool) -> Iterator[None]:
    """Hold the lock of the table at ``location`` (shared to list, exclusive to publish)."""
    key = file_uri(location.replace("s3a://", "s3://", 1)).rstrip("/")
    directory = settings.data_dir / "run" / "table-locks"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.lock"
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
