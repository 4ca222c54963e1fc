"""A local server process of an instance: started, awaited, stopped.

The server runs in the foreground under ``ManagedProcess`` (pid file and log
in the instance's directory), so that a crash at start is reported with the
last lines of its log, and a recycled pid is never taken for the server.
"""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path

from lakeward.databases.base import LOCALHOST, Account, Engine
from lakeward.errors import StackError
from lakeward.process import ManagedProcess, listens_on, port_frees_within

START_TIMEOUT = 60.0
STOP_TIMEOUT = 60.0


class LocalServer:
    def __init__(self, root: Path, engine: Engine, major: str, port: int) -> None:
        self.root = root
        self.engine = engine
        self.major = major
        self.port = port
        self.process = ManagedProcess("server", root)

    @property
    def log(self) -> Path:
        return self.process.log_file

    def running(self) -> bool:
        return self.process.pid() is not None

    def start(self, account: Account | None, timeout: float = START_TIMEOUT) -> None:
        if self.running():
            return
        # A server just killed holds its port until its last thread is gone.
        if not port_frees_within(LOCALHOST, self.port):
            raise StackError(
                f"port {self.port} on {LOCALHOST} is taken by another process; the "
                f"{self.engine.server_name} server of {self.root.name} cannot start on it"
            )
        command = self.engine.server_command(self.root, self.major)
        self.process.start(account.command(command) if account else command)
        self.process.wait_until(self._ready, timeout, "ready")

    def _ready(self) -> bool:
        pid = self.process.pid()
        return (
            pid is not None
            and listens_on(pid, self.port)
            and self.engine.ready(self.root, self.major, self.port)
        )

    def stop(self, timeout: float = STOP_TIMEOUT) -> bool:
        """Stop the server the engine's way (PostgreSQL: fast shutdown); False if not running."""
        pid = self.process.pid()
        if pid is None:
            return False
        # Only the server's main process: it stops its own workers in order.
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, self.engine.shutdown_signal)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.process.pid() is not None:
            time.sleep(0.1)
        self.process.stop()  # whatever is left of the group, if it hung
        return True
