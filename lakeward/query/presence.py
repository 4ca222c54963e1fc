"""This process among the SQL service's server processes: presence, stops, orphans.

Several processes serve one stack's SQL service (``server.workers``); any of
them may be asked about an execution another one runs. Each process that runs
queries:

* registers itself in the state database (``query_processes``) and keeps a
  heartbeat there, so that the others can tell it is alive;
* while it runs queries, polls for stops asked of its executions by another
  process (a flag on the execution): one indexed read every ``STOP_POLL``
  seconds once an execution has run that long, so a stop takes effect within
  about that much (twice that of a query's start);
* now and then fails the executions of processes that are gone: one of this
  host whose pid no longer exists at once, any other after ``SILENT_AFTER``
  seconds without a heartbeat; and rolls back the writes they left unfinished.
  The server's supervisor fails the executions the moment it sees a worker die
  (``end``), with the cause in the reason.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from lakeward.query.store import Store

log = logging.getLogger(__name__)

HEARTBEAT = 2.0
"""Seconds between heartbeats."""
SILENT_AFTER = 30.0
"""Seconds without a heartbeat after which a process elsewhere is taken for dead."""
STOP_POLL = 0.05
"""Seconds between looks for stop requests while this process runs queries."""
IDLE_POLL = 0.5
REAP_EVERY = 5.0
"""Seconds between looks for executions whose process is gone."""


def new_process_id() -> str:
    """``host:pid:random``: unique even when a pid is reused."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


def orphan_reason(owner: str | None, cause: str = "stopped before it finished") -> str:
    """The StateChangeReason of an execution whose process is gone."""
    if owner is None:
        return "the service restarted while the query was running"
    host, pid = owner.rsplit(":", 2)[:2]
    return f"the server process running the query (pid {pid} on {host}) {cause}; run it again"


def end_process(store: Store, process: str, cause: str) -> list[str]:
    """Forget a process known to be gone and fail its unfinished executions, naming the
    cause (its supervisor knows how it ended)."""
    store.end_process(process)
    failed = store.fail_orphans(
        lambda owner: orphan_reason(owner, cause) if owner == process else orphan_reason(owner)
    )
    # Another process may have found it gone first (the pid vanished while the supervisor
    # was busy) and failed its executions without knowing how it ended: say it now.
    store.reword_failures(process, orphan_reason(process), orphan_reason(process, cause))
    return failed


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive, but not one of ours
        return True
    return True


class Presence:
    """Keeps this process registered and acts on stops asked of its executions."""

    def __init__(
        self,
        store: Store,
        on_stop: Callable[[str], object],
        running_since: Callable[[], float | None],
        process: str | None = None,
        on_reap: Callable[[], object] | None = None,
    ) -> None:
        """``running_since`` tells when (``time.monotonic()``) the longest-running of
        this process's executions started, None if none runs. ``on_reap`` runs after
        each look for processes that are gone (their writes are rolled back there:
        query/journal.py)."""
        self.store = store
        self._on_reap = on_reap
        self.id = process or new_process_id()
        self._on_stop = on_stop
        self._running_since = running_since
        self._closing = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.store.register_process(self.id, os.getpid(), socket.gethostname())
        self.reap()
        self._thread = threading.Thread(target=self._loop, name="query-presence", daemon=True)
        self._thread.start()

    def wake(self) -> None:
        """A query started: look for its stops at the fast pace."""
        self._wake.set()

    def close(self) -> None:
        self._closing.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.store.end_process(self.id)

    def reap(self) -> list[str]:
        """Forget the processes that are gone; fail the executions they left unfinished."""
        host = socket.gethostname()
        silent_since = datetime.now(UTC) - timedelta(seconds=SILENT_AFTER)
        for process, pid, where, heartbeat in self.store.live_processes():
            if process == self.id:
                continue
            if (where == host and not _pid_alive(pid)) or heartbeat < silent_since:
                self.store.end_process(process)
        failed = self.store.fail_orphans(orphan_reason)
        if failed:
            log.warning("failed %d queries whose server process is gone", len(failed))
        if self._on_reap is not None:
            self._on_reap()
        return failed

    def _loop(self) -> None:
        beat = reaped = time.monotonic()
        looked = float("-inf")  # the last look for stops
        while not self._closing.is_set():
            # An execution is first looked for once it has run STOP_POLL: a stop is hardly
            # asked of it sooner, and the many queries that end by then cost no look.
            since = self._running_since()
            due = None if since is None else max(since, looked) + STOP_POLL
            now = time.monotonic()
            if due is None or now < due:
                self._wake.wait(IDLE_POLL if due is None else min(due - now, IDLE_POLL))
                self._wake.clear()
            try:
                if due is not None and now >= due:
                    looked = now
                    for execution_id in self.store.stop_requests(self.id):
                        self._on_stop(execution_id)
                now = time.monotonic()
                if now - beat >= HEARTBEAT:
                    if not self.store.heartbeat(self.id):
                        # Taken for dead while stalled: its queries have been failed
                        # already; register again so that new ones are not.
                        self.store.register_process(self.id, os.getpid(), socket.gethostname())
                    beat = now
                if now - reaped >= REAP_EVERY:
                    self.reap()
                    reaped = now
            except Exception:  # the state database busy or away: try again next round
                log.exception("query presence: the state database did not answer")
