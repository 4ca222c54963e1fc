"""A filesystem watcher for ``file://`` lakes written by programs other than lakeward.

lakeward's own writes announce themselves through ``Storage.subscribe``; a
Spark job, ``cp`` or an rsync do not. The watcher turns their file events into
``ObjectEvent``s: a finished write (inotify's close-after-write), a rename into
place (how careful writers publish a file), a file moved in from outside the
lake, a deletion. Plain "modified" events are not used: they fire mid-write,
and the close that follows says the same thing once the file is whole.

Only those four kinds are asked of the kernel. Left to its default, watchdog
also asks for every open, read-only close, modification and attribute change:
each query's reads of the lake's Parquet files and each chunk of a result
written would be an event for the server to read and drop.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path

from watchdog.events import (
    FileClosedEvent,
    FileCreatedEvent,
    FileDeletedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from lakeward.erasure.realtime.notifications import Kind, ObjectEvent
from lakeward.errors import InvalidKey
from lakeward.storage.base import check_bucket, check_key

log = logging.getLogger(__name__)

Sink = Callable[[ObjectEvent], None]


def lake_object(base: Path, path: str) -> tuple[str, str] | None:
    """The (bucket, key) of a file under a lake directory; None if it is no object.

    In-flight writes (lakeward's temporary names), files right under the lake
    root and names a lake cannot hold are not objects.
    """
    try:
        relative = Path(path).relative_to(base).as_posix()
    except ValueError:
        return None
    bucket, sep, key = relative.partition("/")
    if not sep:
        return None
    try:
        check_bucket(bucket)
        check_key(key)
    except InvalidKey:
        return None
    return bucket, key


class _Handler(FileSystemEventHandler):
    def __init__(self, base: Path, sink: Sink) -> None:
        self._base = base
        self._sink = sink

    def _emit(self, kind: Kind, path: bytes | str) -> None:
        found = lake_object(self._base, os.fsdecode(path))
        if found is not None:
            self._sink(ObjectEvent(kind=kind, bucket=found[0], key=found[1], source="watcher"))

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory:
            return
        if isinstance(event, FileMovedEvent):
            if event.src_path:
                self._emit("removed", event.src_path)
            if event.dest_path:
                self._emit("created", event.dest_path)
        elif isinstance(event, FileClosedEvent | FileCreatedEvent):
            self._emit("created", event.src_path)
        elif isinstance(event, FileDeletedEvent):
            self._emit("removed", event.src_path)


WATCHED_EVENTS = [FileClosedEvent, FileCreatedEvent, FileDeletedEvent, FileMovedEvent]
"""What the kernel reports (see the module docstring); a directory's own events are not needed."""


class LakeWatcher:
    """Watches a ``file://`` lake directory (recursively) and feeds a sink.

    The sink is called on watchdog's thread and must be quick (it enqueues).
    """

    def __init__(self, base: Path, sink: Sink) -> None:
        self.base = base
        self._sink = sink
        self._observer: Observer | None = None  # type: ignore[valid-type]

    def start(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        observer = Observer()
        observer.schedule(
            _Handler(self.base, self._sink),
            str(self.base),
            recursive=True,
            event_filter=WATCHED_EVENTS,
        )
        observer.daemon = True
        try:
            observer.start()
        except OSError:
            observer.stop()
            raise
        self._observer = observer

    def stop(self) -> None:
        observer, self._observer = self._observer, None
        if observer is not None:
            observer.stop()
            observer.join(timeout=5)
