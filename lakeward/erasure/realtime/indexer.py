"""The real-time indexer: object events in, index updates out, on one worker thread.

Events arrive from three sources -- the lake's own storage (``subscribe``), the
filesystem watcher of a ``file://`` lake, and ``POST /events/s3`` -- and are
queued; the worker drains the queue in batches and applies each object's
events to the index through ``ErasureIndexService``.

Why duplicates and reordering are harmless: an event is only a hint that an
object changed. The worker never trusts the event's content; it reads the
object as it is *now* (checking the eTag of what it read), and the index store
keeps, per object, the newest sequencer applied and a tombstone for removals.
So a late or repeated event either finds its sequencer already superseded and
is skipped without a read, or re-reads the object and writes the same entries.
A removal is only applied to an object that is really gone: if the object
exists again by the time its removal is processed, it is indexed instead.

Several events of one object in one batch are coalesced into one update; the
lag of an update is measured from the first of them.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lakeward.erasure.index.store import pad_sequencer
from lakeward.erasure.realtime.notifications import ObjectEvent, Parsed, storage_event
from lakeward.erasure.realtime.status import RealtimeStatus, write_status
from lakeward.erasure.realtime.watcher import LakeWatcher
from lakeward.sqlstate import persisted

if TYPE_CHECKING:
    from lakeward.config import Settings
    from lakeward.erasure.mappers import Mappers
    from lakeward.erasure.service import ErasureIndexService
    from lakeward.storage import Storage

log = logging.getLogger(__name__)

BATCH = 1000
"""Events drained per round: enough to coalesce a burst, few enough to stay responsive."""
OBJECTS_PER_TRANSACTION = 16
"""Objects of a backlog indexed in one transaction: fewer commits, still prompt updates."""
WATCHER_SETTLE = 0.25
"""Seconds a watcher event waits, so that a write's create and close make one update."""
MAPPERS_TTL = 2.0
"""Seconds the data mappers are reused before being re-read (new datasets get picked up)."""
STATUS_INTERVAL = 1.0
LAG_SAMPLES = 2000


def lake_location(storage: Storage, bucket: str, key: str) -> tuple[str, str] | None:
    """The lake's (bucket, key) of an object named in an S3 notification, or None.

    An ``s3://root/prefix`` lake stores bucket ``b``'s key ``k`` as
    ``prefix/b/k`` in the root bucket, and a real bucket's notifications name
    it that way; lakeward's own events (and a ``file://`` lake's) already use
    the lake's buckets.
    """
    root_bucket: str | None = getattr(storage, "root_bucket", None)
    if root_bucket is None:
        return bucket, key
    if bucket != root_bucket:
        return bucket, key
    base: str = getattr(storage, "base_prefix", "")
    if not key.startswith(base):
        return None
    lake_bucket, sep, lake_key = key[len(base) :].partition("/")
    return (lake_bucket, lake_key) if sep and lake_key else None


class RealtimeIndexer:
    """Consumes object events and keeps the erasure index current (see the module docstring)."""

    def __init__(
        self,
        service: ErasureIndexService,
        *,
        watch: bool = True,
        status_path: Any = None,
        settle: float = WATCHER_SETTLE,
    ) -> None:
        self.service = service
        self.storage = service.storage
        self._lake_dir = self.storage.local_dir if watch else None  # where a watcher looks
        self._status_path = status_path
        self._settle = settle
        self._queue: queue.Queue[ObjectEvent] = queue.Queue()
        self._delayed: dict[tuple[str, str], list[ObjectEvent]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watcher: LakeWatcher | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._idle = threading.Condition()
        self._submitted = 0
        self._finished = 0
        self._mappers: tuple[float, Mappers] | None = None
        self.status = RealtimeStatus(watching=None)
        self._lags: deque[float] = deque(maxlen=LAG_SAMPLES)
        self._status_written = 0.0

    @classmethod
    def for_settings(cls, settings: Settings) -> RealtimeIndexer:
        from lakeward.erasure.service import ErasureIndexService

        return cls(
            ErasureIndexService(settings),
            status_path=settings.data_dir / "erasure" / "realtime.json",
        )

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="erasure-indexer", daemon=True)
        self._thread.start()
        self._unsubscribe = self.storage.subscribe(self.on_storage_event)
        if self._lake_dir is not None:
            watcher = LakeWatcher(self._lake_dir, self.submit)
            try:
                watcher.start()
            except OSError as exc:
                # Most often the inotify watch limit (one watch per directory): the
                # server runs on without the watcher rather than not at all.
                log.error(
                    "cannot watch %s for files written by other programs (%s); raise "
                    "fs.inotify.max_user_watches, or index them with: lakeward erasure "
                    "index build",
                    self._lake_dir,
                    exc.strerror or exc,
                )
            else:
                self._watcher = watcher
                self.status.watching = str(self._lake_dir)
        self.status.started_at = time.time()

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join(timeout=30)
        self._write_status(force=True, running=False)

    def __enter__(self) -> RealtimeIndexer:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    # -- sources -------------------------------------------------------------

    def on_storage_event(self, notification: dict[str, Any]) -> None:
        """A ``Storage.subscribe`` listener: quick, it only queues."""
        self.accept(storage_event(notification))

    def accept(self, parsed: Parsed) -> None:
        """Queue a notification's events; dead-letter what could not be read."""
        for malformed in parsed.malformed:
            self.service.store.add_dead_letter("event", f"{malformed.reason}: {malformed.excerpt}")
        if parsed.malformed:
            self.service.store.count("events_malformed", len(parsed.malformed))
        if parsed.ignored:
            self.service.store.count("events_other_kinds", parsed.ignored)
        for url in parsed.confirmations:
            log.warning("SNS subscription confirmation received: open %s to confirm it", url)
        for event in parsed.events:
            self.submit(event)

    def submit(self, event: ObjectEvent) -> None:
        with self._idle:
            self._submitted += 1
        self._queue.put(event)

    def wait_idle(self, timeout: float = 30.0) -> bool:
        """Wait until every event submitted so far is applied; False on timeout."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._finished < self._submitted:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._idle.wait(left)
        return True

    def lag_samples(self) -> list[float]:
        """Seconds from event to searchable entries, of the latest updates (oldest first)."""
        return list(self._lags)

    # -- the worker ----------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            batch = self._drain()
            if batch:
                try:
                    # Tried again while the index's database turns it away for a while (its
                    # disk full, a lock): applying a batch twice is harmless, dropping it not.
                    apply = functools.partial(self._apply_batch, batch)
                    persisted(apply, "the erasure index's update", stopping=self._stop)
                except Exception:  # a bug or a dead database: log, keep the worker alive
                    log.exception("the erasure indexer failed on a batch of %d events", len(batch))
                    self._done(len(batch))
            self._write_status()

    def _drain(self) -> list[ObjectEvent]:
        timeout = 0.05 if self._delayed else 0.2
        events: list[ObjectEvent] = []
        try:
            events.append(self._queue.get(timeout=timeout))
            while len(events) < BATCH:
                events.append(self._queue.get_nowait())
        except queue.Empty:
            pass
        now = time.time()
        ready: list[ObjectEvent] = []
        for event in events:
            if event.source == "watcher" and self._settle > 0:
                self._delayed.setdefault((event.bucket, event.key), []).append(event)
            else:
                ready.append(event)
        # A watcher event waits until its object has been quiet for the settle time.
        for name, waiting in list(self._delayed.items()):
            if now - waiting[-1].received >= self._settle:
                ready.extend(self._delayed.pop(name))
        return ready

    def _done(self, count: int) -> None:
        with self._idle:
            self._finished += count
            self._idle.notify_all()

    def mappers(self) -> Mappers:
        now = time.monotonic()
        if self._mappers is None or now - self._mappers[0] > MAPPERS_TTL:
            self._mappers = (now, self.service.mappers())
        return self._mappers[1]

    def _apply_batch(self, batch: list[ObjectEvent]) -> None:
        outcomes: Counter[str] = Counter()
        by_object: dict[tuple[str, str], list[ObjectEvent]] = {}
        for event in batch:
            located = lake_location(self.storage, event.bucket, event.key)
            if located is None:
                outcomes["ignored_outside_lake"] += 1
                continue
            by_object.setdefault(located, []).append(event)
        outcomes["events_coalesced"] += sum(len(v) - 1 for v in by_object.values())
        mappers = self.mappers()
        to_index: list[tuple[str, str, str | None, float]] = []
        for (bucket, key), events in by_object.items():
            # The newest event by sequencer stands for the others (they are older news of
            # the same object); without sequencers, the last one received.
            latest = max(events, key=lambda e: (pad_sequencer(e.sequencer) or "", e.received))
            first_seen = min(e.received for e in events)
            outcome = self._apply(mappers, bucket, key, latest)
            if outcome == "index":
                to_index.append((bucket, key, latest.sequencer, first_seen))
            else:
                self._count(outcomes, outcome, first_seen)
        # A backlog of objects is written a few per transaction: one commit for several.
        for start in range(0, len(to_index), OBJECTS_PER_TRANSACTION):
            chunk = to_index[start : start + OBJECTS_PER_TRANSACTION]
            done = self.service.index_objects([(b, k, s) for b, k, s, _ in chunk], mappers)
            for outcome, (*_, first_seen) in zip(done, chunk, strict=True):
                self._count(outcomes, outcome, first_seen)
        outcomes["events"] += len(batch)
        self.service.store.count_all({f"realtime_{n}": v for n, v in outcomes.items() if v})
        self.status.record(outcomes)
        self._done(len(batch))

    def _count(self, outcomes: Counter[str], outcome: str, first_seen: float) -> None:
        outcomes[outcome] += 1
        if outcome in ("indexed", "removed", "dead_letter"):
            self._lags.append(time.time() - first_seen)

    def _apply(self, mappers: Mappers, bucket: str, key: str, event: ObjectEvent) -> str:
        """The outcome of an object's event, or "index" when it is to be (re)indexed."""
        mapper = mappers.dataset_for(bucket, key)
        if mapper is None:
            return "outside"
        uri = self.storage.uri(bucket, key)
        sequencer = pad_sequencer(event.sequencer)
        if sequencer is not None:
            row = self.service.store.object(uri)
            if row is not None and row.sequencer is not None and row.sequencer >= sequencer:
                return "stale"  # a newer change of this object is already applied
        if event.kind == "removed" and not self.storage.exists(bucket, key):
            return self.service.remove_object(bucket, key, event.sequencer, mappers)
        # Created, or "removed" but there again: index the object as it is now.
        return "index"

    # -- status --------------------------------------------------------------

    def _write_status(self, force: bool = False, running: bool = True) -> None:
        now = time.time()
        if not force and now - self._status_written < STATUS_INTERVAL:
            return
        self._status_written = now
        pending = self._queue.qsize() + sum(len(v) for v in self._delayed.values())
        self.status.snapshot(pending=pending, lags=list(self._lags), running=running)
        if self._status_path is not None:
            with contextlib.suppress(OSError):
                write_status(self._status_path, self.status)
