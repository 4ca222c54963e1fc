"""The real-time indexer's live figures, shared with ``lakeward erasure index status``.

The worker runs inside the server; the status command runs in another
process. The worker writes a small JSON file in the data dir about once a
second (temporary file + rename, so a reader never sees half of it); counts
that must survive restarts live in the index database's counters instead.
"""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

STALE_AFTER = 10.0
"""Seconds without an update after which a status file no longer describes a live worker."""


def _percentile(values: list[float], fraction: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@dataclass
class RealtimeStatus:
    watching: str | None
    """The directory the filesystem watcher watches, or None."""
    running: bool = True
    pid: int = field(default_factory=os.getpid)
    started_at: float = 0.0
    updated_at: float = 0.0
    pending: int = 0
    """Events received and not yet applied."""
    lag_last: float | None = None
    """Seconds from an object's event to its searchable entries: the last update."""
    lag_p50: float | None = None
    lag_p95: float | None = None
    outcomes: dict[str, int] = field(default_factory=dict)
    """Since the worker started: events, indexed, removed, stale, outside, dead_letter, ..."""

    def record(self, outcomes: Counter[str]) -> None:
        merged = Counter(self.outcomes)
        merged.update(outcomes)
        self.outcomes = dict(merged)

    def snapshot(self, pending: int, lags: list[float], running: bool) -> None:
        self.pending = pending
        self.running = running
        self.updated_at = time.time()
        self.lag_last = lags[-1] if lags else None
        self.lag_p50 = _percentile(lags, 0.50)
        self.lag_p95 = _percentile(lags, 0.95)

    def is_live(self, now: float | None = None) -> bool:
        return self.running and (now or time.time()) - self.updated_at < STALE_AFTER


def write_status(path: Path, status: RealtimeStatus) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(asdict(status), sort_keys=True))
    temp.replace(path)


def read_status(path: Path) -> RealtimeStatus | None:
    """The last status a worker wrote, or None when there is none (or it is unreadable)."""
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return RealtimeStatus(**data)
    except (OSError, ValueError, TypeError):
        return None
