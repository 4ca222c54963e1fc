"""``lakeward serve``'s outermost process: it binds the server's port once and keeps a
supervisor (supervisor.py) running on it.

The keeper starts another supervisor at once when one is killed or crashes, on the
same listening socket, so connections made meanwhile wait in the socket's backlog
instead of being refused. The dead supervisor's workers serve until the new one's do
(worker.py), so the server answers throughout; if they died too, it answers again as
soon as the new workers have started. A supervisor
that had served is replaced at once; one that keeps dying before it serves is restarted
less and less often (up to every ``MAX_DELAY`` s), with the cause in the server's log.

With ``server.standby``, once the supervisor serves the keeper also starts a standby:
a supervisor whose workers are built and wait. When the serving supervisor dies, the
standby is told to serve and takes over at once, the killed workers' places with it,
without the seconds new workers take to load; another standby is then started.

The keeper does nothing else, so that there is as little as possible to go wrong in
the one process nothing restarts. Stopping it (SIGTERM or SIGINT, as ``lakeward
down`` does) stops the supervisor, which stops its workers.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import socket
import subprocess
import sys
import threading
import time
from types import FrameType

from lakeward.config import Settings
from lakeward.errors import StackError
from lakeward.http.supervisor import STOP_TIMEOUT, read_record
from lakeward.process import exit_cause

log = logging.getLogger(__name__)

FIRST_DELAY = 0.1
"""Seconds before a dead supervisor's replacement starts."""
MAX_DELAY = 30.0
STEADY = 30.0
"""A supervisor that lived this long died by accident, not by a fault it will meet again."""
STANDBY_LOOK = 0.5
"""Seconds between the keeper's looks at its standby (the serving supervisor's exit
wakes it at once)."""


def next_start(failures: int, served: bool, lived: float) -> tuple[int, float]:
    """After a supervisor died: the failures in a row so far, and the seconds to wait
    before the next. One that had served was killed, not failing to start: at once."""
    if served:
        return 0, 0.0
    failures = failures + 1 if lived < STEADY else 1
    return failures, min(MAX_DELAY, FIRST_DELAY * 2 ** (failures - 1))


class Keeper:
    def __init__(self, settings: Settings, port: int) -> None:
        self.settings = settings
        self.port = port
        self.restarts = 0
        self._stopping = threading.Event()
        self._child: subprocess.Popen[bytes] | None = None
        self._standby: subprocess.Popen[bytes] | None = None
        self._standby_failures = 0
        self._standby_due = 0.0

    def run(self) -> None:
        host = self.settings.server.host
        try:
            listener = socket.create_server((host, self.port), backlog=2048)
        except OSError as exc:
            raise StackError(
                f"cannot listen on {host}:{self.port}: {exc.strerror}; if another process has "
                "the port, choose another with server.port (or LAKEWARD_SERVER__PORT)"
            ) from None
        listener.set_inheritable(True)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        failures = 0
        try:
            while not self._stopping.is_set():
                started = time.monotonic()
                self._child = self._start(listener)
                code = self._wait(listener)
                while not self._stopping.is_set() and self._take_over(code):
                    code = self._wait(listener)
                if self._stopping.is_set():
                    break
                served = read_record(self.settings).get("supervisor") == self._child.pid
                failures, delay = next_start(failures, served, time.monotonic() - started)
                log.warning(
                    "the supervisor %s; starting another in %.1f s", exit_cause(code), delay
                )
                self.restarts += 1
                self._stopping.wait(delay)
        finally:
            for child in (self._child, self._standby):
                if child is not None and child.poll() is None:
                    child.terminate()
            for child in (self._child, self._standby):
                if child is not None:
                    # A stopped supervisor stops its workers first; none is left behind.
                    try:
                        child.wait(STOP_TIMEOUT + 5)
                    except subprocess.TimeoutExpired:
                        child.kill()
            listener.close()

    def _wait(self, listener: socket.socket) -> int:
        """Until the serving supervisor exits (its code), keeping a standby meanwhile."""
        assert self._child is not None
        # A pidfd turns readable when the process exits: the keeper sleeps until then,
        # where Popen.wait(timeout) would wake every few milliseconds to look.
        exited = os.pidfd_open(self._child.pid)
        try:
            while not select.select([exited], [], [], STANDBY_LOOK)[0]:
                if self.settings.server.standby and not self._stopping.is_set():
                    self._keep_standby(listener)
        finally:
            os.close(exited)
        return self._child.wait()

    def _keep_standby(self, listener: socket.socket) -> None:
        standby = self._standby
        if standby is not None:
            code = standby.poll()
            if code is None:
                return
            self._standby = None
            self._standby_failures, delay = next_start(self._standby_failures, False, 0.0)
            self._standby_due = time.monotonic() + delay
            log.warning("the standby supervisor %s; another in %.1f s", exit_cause(code), delay)
        if time.monotonic() < self._standby_due:
            return
        record = read_record(self.settings)
        workers = record.get("workers") or []
        assert self._child is not None
        if record.get("supervisor") == self._child.pid and all(
            w.get("state") == "running" for w in workers
        ):
            # Only once the serving one serves fully: its start is not slowed by this.
            self._standby = self._start(listener, standby=True)

    def _take_over(self, code: int) -> bool:
        """The serving supervisor exited with ``code``: promote the standby, if one waits."""
        standby, self._standby = self._standby, None
        if standby is None or standby.poll() is not None:
            return False
        assert standby.stdin is not None
        try:
            standby.stdin.write(b"serve\n")
            standby.stdin.close()
        except OSError:
            return False
        log.warning(
            "the supervisor %s; the standby (pid %d) takes over", exit_cause(code), standby.pid
        )
        self._child = standby
        self._standby_failures = 0
        self.restarts += 1
        return True

    def _start(self, listener: socket.socket, standby: bool = False) -> subprocess.Popen[bytes]:
        child = subprocess.Popen(
            [sys.executable, "-m", "lakeward.http.supervisor"],
            stdin=subprocess.PIPE,
            pass_fds=[listener.fileno()],
        )
        config = {
            "keeper": os.getpid(),
            "data_dir": str(self.settings.data_dir),
            "settings": self.settings.to_raw(),
            "fd": listener.fileno(),
            "port": self.port,
            "standby": standby,
        }
        assert child.stdin is not None
        # On stdin, not argv: the settings hold the API's secret.
        child.stdin.write(json.dumps(config).encode() + b"\n")
        child.stdin.flush()
        if not standby:  # a standby's stdin stays open for the word to serve
            child.stdin.close()
        return child

    def _stop(self, signum: int, _frame: FrameType | None) -> None:
        self._stopping.set()
        for child in (self._child, self._standby):
            if child is not None and child.poll() is None:
                child.send_signal(signum)
