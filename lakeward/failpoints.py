"""Crash points: where a process kills itself with SIGKILL, as ``kill -9`` would.

The crash tests name points in ``LAKEWARD_FAILPOINTS`` (comma-separated) to stop a
process at an exact moment; unset, a point costs one environment lookup.
"""

from __future__ import annotations

import os
import signal

FAILPOINTS_ENV = "LAKEWARD_FAILPOINTS"


def failpoint(name: str) -> None:
    if name in os.environ.get(FAILPOINTS_ENV, "").split(","):
        os.kill(os.getpid(), signal.SIGKILL)
