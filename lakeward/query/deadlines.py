"""Actions due at given moments, run from one thread: the executions' timeouts.

A ``threading.Timer`` per execution would start a thread for each query (and end it),
about 0.1 ms of CPU a query; one thread looks after every deadline instead. The
deadlines are those of the executions that run now, a few dozen at most, so finding
the next one is a scan.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Hashable

log = logging.getLogger(__name__)


class Deadlines:
    def __init__(self, name: str) -> None:
        self._name = name
        self._due: dict[Hashable, tuple[float, Callable[[], object]]] = {}
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None
        self._closed = False

    def set(self, key: Hashable, after: float, action: Callable[[], object]) -> None:
        """Run ``action`` in ``after`` seconds, unless ``clear(key)`` comes first."""
        with self._changed:
            self._due[key] = (time.monotonic() + after, action)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self._name, daemon=True)
                self._thread.start()
            self._changed.notify()

    def clear(self, key: Hashable) -> None:
        with self._changed:
            self._due.pop(key, None)

    def close(self) -> None:
        """Forget every deadline and end the thread."""
        with self._changed:
            self._due.clear()
            self._closed = True
            self._changed.notify()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def _loop(self) -> None:
        while True:
            with self._changed:
                if self._closed:
                    return
                now = time.monotonic()
                ready = [(when, key) for key, (when, _) in self._due.items() if when <= now]
                ready.sort(key=lambda due: due[0])
                actions = [self._due.pop(key)[1] for _, key in ready]
                if not actions:
                    upcoming = min((when for when, _ in self._due.values()), default=None)
                    self._changed.wait(None if upcoming is None else upcoming - now)
                    continue
            for action in actions:
                try:
                    action()
                except Exception:  # one failing action must not end the others' deadlines
                    log.exception("%s: a deadline's action failed", self._name)
