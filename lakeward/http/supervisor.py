"""``lakeward serve``: several worker processes behind one port, under a supervisor.

The supervisor takes the listening socket from the keeper (keeper.py, which binds
the port once and restarts a supervisor that dies) and hands it to
``server.workers`` worker processes (worker.py, one uvicorn each); the kernel
spreads connections among them, so one Python process (one GIL) no longer caps
the server. It also:

* replaces a worker that dies, at once (it looks every ``CHECK`` s) by a spare
  it keeps ready once the workers serve, and fails
  the executions that worker was running, naming the cause; the others are
  untouched, since every execution's state is in the state database and
  every result in the lake;
* runs the background services once for all workers (background.py) and
  relays the webhook's notifications to them (relay.py);
* keeps ``run/server-workers.json``: each worker's pid, state and restarts,
  which ``lakeward status`` shows.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from types import FrameType
from typing import TYPE_CHECKING, Any

from lakeward.config import Settings
from lakeward.process import die_with_parent, exit_cause

if TYPE_CHECKING:  # `lakeward status` reads the workers without loading the server
    from lakeward.http.relay import RelayServer
    from lakeward.query.service import QueryService

log = logging.getLogger(__name__)

CHECK = 0.1
"""Seconds between looks at the workers."""
STOP_TIMEOUT = 10.0
"""Seconds a worker has to finish its requests when the server stops."""
WORKERS_FILE = "server-workers.json"


def worker_count(settings: Settings) -> int:
    return settings.server.workers or os.cpu_count() or 1


@dataclass
class Process:
    """A worker process: serving a slot, or the spare that will take the next free one."""

    popen: subprocess.Popen[bytes]
    process_id: str  # its name in the SQL service's state (presence.py)
    started: float

    @property
    def pid(self) -> int:
        return self.popen.pid


@dataclass
class Slot:
    index: int
    process: Process
    state: str = "starting"  # starting | running
    restarts: int = 0


def read_record(settings: Settings) -> dict[str, Any]:
    """What the running supervisor last recorded: its pid, its workers, its spare
    ({} if none runs)."""
    try:
        record = json.loads((settings.data_dir / "run" / WORKERS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def read_workers(settings: Settings) -> list[dict[str, object]]:
    """The workers as the supervisor last recorded them ([] if it is not running)."""
    workers = read_record(settings).get("workers")
    return workers if isinstance(workers, list) else []


class Supervisor:
    """Keeps ``server.workers`` workers serving, and one spare ready to replace a dead one.

    A worker takes seconds to import and build the application; the spare has
    done that already and only waits for the word to serve, so a dead worker's
    place is taken again within ``CHECK`` s plus whatever the spare still had to do.
    """

    def __init__(
        self,
        settings: Settings,
        port: int,
        listener: socket.socket | None = None,
        *,
        standby: bool = False,
    ) -> None:
        self.settings = settings
        self.port = port
        self.listener = listener
        self.standby = standby
        self.count = worker_count(settings)
        self.slots: list[Slot] = []
        self.spare: Process | None = None
        self._launched = 0
        self._stopping = threading.Event()
        self._file = settings.data_dir / "run" / WORKERS_FILE

    def run(self) -> None:
        from lakeward.http.relay import RelayServer

        listener = self.listener or socket.create_server(
            (self.settings.server.host, self.port), backlog=2048
        )
        listener.set_inheritable(True)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._stop)
        relay = RelayServer()  # its indexer comes below, before any worker serves
        # The workers start first: each loads the application (seconds) while this
        # process loads its own services, instead of after it.
        launched = [self._launch(listener, relay) for _ in range(self.count)]

        from lakeward.access.control import AccessControl
        from lakeward.http.background import Background
        from lakeward.query.service import QueryService

        if self.standby:
            if not self._wait_for_the_word():
                self._stop_processes([p.popen for p in launched])
                listener.close()
                relay.close()
                return
            # The serving supervisor died: its workers' places are taken at once, by
            # workers built long ago; the services (the catalog registered) follow.
            for index, process in enumerate(launched, start=1):
                self.slots.append(Slot(index, self._serve(process)))
        access = AccessControl(self.settings)
        # The stack's catalog is registered here, once; its BI refreshes run queries here.
        queries = QueryService(self.settings, access=access, owner=True)
        background = Background(self.settings, access, queries, catch_up=True)
        background.start()
        relay.indexer = background.indexer
        try:
            if not self.standby:
                for index, process in enumerate(launched, start=1):
                    self.slots.append(Slot(index, self._serve(process)))
            self._write()
            log.warning(
                "serving on %s:%d with %d workers", self.settings.server.host, self.port, self.count
            )
            self._watch(listener, relay, queries)
        finally:
            self._stop_workers()
            listener.close()
            relay.close()
            background.stop()
            queries.close()
            self._forget()

    def _forget(self) -> None:
        """Remove the workers file, if it is still ours: a supervisor started since (a
        restart while this one was stopping) has written its own, which must stay."""
        try:
            owner = json.loads(self._file.read_text()).get("supervisor")
        except (OSError, ValueError, AttributeError):
            return
        if owner == os.getpid():
            self._file.unlink(missing_ok=True)

    def _stop(self, _signum: int, _frame: FrameType | None) -> None:
        self._stopping.set()

    def _wait_for_the_word(self) -> bool:
        """As a standby: wait, workers built, until the keeper says ``serve`` (True), or
        stops this process or goes away (False)."""
        said: list[str] = []
        heard = threading.Event()

        def listen() -> None:
            said.append(sys.stdin.readline().strip())
            heard.set()

        threading.Thread(target=listen, name="standby", daemon=True).start()
        while not heard.wait(CHECK):
            if self._stopping.is_set():
                return False
        return said == ["serve"] and not self._stopping.is_set()

    def _launch(self, listener: socket.socket, relay: RelayServer) -> Process:
        """Start a worker; it builds the application and waits for ``_serve``."""
        popen = subprocess.Popen(
            [sys.executable, "-m", "lakeward.http.worker"],
            stdin=subprocess.PIPE,
            pass_fds=[listener.fileno()],
        )
        self._launched += 1
        process = Process(
            popen, f"{socket.gethostname()}:{popen.pid}:w{self._launched}", time.time()
        )
        config = {
            "supervisor": os.getpid(),
            "data_dir": str(self.settings.data_dir),
            "settings": self.settings.to_raw(),
            "fd": listener.fileno(),
            "process": process.process_id,
            "relay": relay.address,
            "key": relay.key.hex(),
        }
        assert popen.stdin is not None
        # On stdin, not argv: the settings hold the API's secret.
        popen.stdin.write(json.dumps(config).encode() + b"\n")
        popen.stdin.flush()
        return process

    @staticmethod
    def _serve(process: Process) -> Process:
        assert process.popen.stdin is not None
        try:
            process.popen.stdin.write(b"serve\n")
            process.popen.stdin.close()
        except OSError:  # it died meanwhile: the next look replaces it
            pass
        return process

    def _watch(self, listener: socket.socket, relay: RelayServer, queries: QueryService) -> None:
        from lakeward.query.presence import end_process

        while not self._stopping.wait(CHECK):
            changed = False
            if self.spare is not None and self.spare.popen.poll() is not None:
                end_process(
                    queries.store, self.spare.process_id, exit_cause(self.spare.popen.returncode)
                )
                self.spare = self._launch(listener, relay)
            for slot in self.slots:
                code = slot.process.popen.poll()
                if code is None:
                    continue
                # The spare first (every moment counts), then the dead worker's queries.
                dead, replacement = slot.process, self.spare or self._launch(listener, relay)
                slot.process, slot.state = self._serve(replacement), "starting"
                slot.restarts += 1
                self.spare = None
                self._write()
                cause = exit_cause(code)
                failed = end_process(queries.store, dead.process_id, cause)
                log.error(
                    "worker %d (pid %d) %s; %d of its queries failed; replaced by pid %d",
                    slot.index,
                    dead.pid,
                    cause,
                    len(failed),
                    replacement.pid,
                )
                changed = True
            if any(slot.state == "starting" for slot in self.slots):
                live = {p[0] for p in queries.store.live_processes()}
                for slot in self.slots:
                    if slot.state == "starting" and slot.process.process_id in live:
                        slot.state, changed = "running", True
            if self.spare is None and all(slot.state == "running" for slot in self.slots):
                # Only once the workers serve: their start is not slowed by the spare's.
                self.spare, changed = self._launch(listener, relay), True
            if changed:
                self._write()

    def _stop_workers(self) -> None:
        running = [slot.process.popen for slot in self.slots]
        if self.spare is not None:
            running.append(self.spare.popen)
        self._stop_processes(running)

    @staticmethod
    def _stop_processes(running: list[subprocess.Popen[bytes]]) -> None:
        for popen in running:
            popen.terminate()
        deadline = time.monotonic() + STOP_TIMEOUT
        for popen in running:
            try:
                popen.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                popen.kill()
                popen.wait()

    def _write(self) -> None:
        record = {
            "supervisor": os.getpid(),
            "port": self.port,
            "workers": [
                {
                    "index": slot.index,
                    "pid": slot.process.pid,
                    "state": slot.state,
                    "restarts": slot.restarts,
                    "started": slot.process.started,
                }
                for slot in self.slots
            ],
            "spare": self.spare.pid if self.spare is not None else None,
        }
        self._file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps(record, indent=2))
        tmp.replace(self._file)


def main() -> None:
    """A supervisor started by the keeper: its configuration comes on stdin."""
    die_with_parent()  # a keeper killed takes the server down, for `lakeward up` to restart
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s: %(message)s")
    config = json.loads(sys.stdin.readline())
    if os.getppid() != config["keeper"]:
        return  # the keeper died before this process asked to die with it
    settings = Settings.model_validate({**config["settings"], "data_dir": config["data_dir"]})
    listener = socket.socket(fileno=config["fd"])
    Supervisor(settings, config["port"], listener, standby=config.get("standby", False)).run()


if __name__ == "__main__":
    main()
