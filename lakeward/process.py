"""Background processes of a stack: a pid file and a log in the data dir.

The pid file also records the process's start time (from /proc), so that a
recycled pid is never mistaken for ours and never killed.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from lakeward.errors import StackError


def _start_ticks(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces; the fields after it are fixed.
    fields = stat.rpartition(")")[2].split()
    if fields[0] == "Z":  # exited; a zombie until its parent (maybe us) reaps it
        _reap(pid)
        return None
    return fields[19]


_PR_SET_PDEATHSIG = 1


def exit_cause(returncode: int) -> str:
    """How a child process ended, in words (its return code as ``Popen`` gives it)."""
    if returncode < 0:
        return f"was killed by signal {-returncode} ({signal.Signals(-returncode).name})"
    return f"exited with code {returncode}"


def die_with_parent(dies: bool = True) -> None:
    """Have the kernel send this process SIGTERM when its parent dies (Linux); with
    ``dies`` false, no longer."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM if dies else 0)
    except (OSError, AttributeError):  # not Linux: the parent's stop still ends us
        pass


def is_running(pid: int) -> bool:
    """Whether a process with this pid is alive (not exited, not a zombie)."""
    return _start_ticks(pid) is not None


def children(pid: int) -> list[int]:
    """The pids of the live processes whose parent is ``pid`` (Linux)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rpartition(")")[2].split()
        except OSError:
            continue  # it exited meanwhile
        if fields[0] != "Z" and int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def port_is_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


PORT_RELEASE_SECONDS = 10.0
"""How long a port may stay held by a server process that was just killed."""


def port_frees_within(host: str, port: int, seconds: float = PORT_RELEASE_SECONDS) -> bool:
    """Whether ``port`` is free now or within ``seconds``: a process just killed keeps
    its sockets until its last thread has exited, a moment after its leader shows as
    a zombie (a JVM's hundreds of threads take a while)."""
    deadline = time.monotonic() + seconds
    while not port_is_free(host, port):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.2)
    return True


_claims: list[socket.socket] = []  # held for the life of the process


def claim_port(host: str, port: int) -> bool:
    """Whether ``port`` is free and now this process's to hand to what it starts: other
    lakeward processes choosing a port skip it while this one lives, so two stacks started
    at once do not both choose it before either binds it. The claim is an abstract Unix
    socket named after the port (Linux): it goes with the process and leaves no file."""
    if not port_is_free(host, port):
        return False
    if not hasattr(socket, "AF_UNIX") or not os.path.exists("/proc/self"):
        return True  # no abstract sockets: the port as free as it looks
    claim = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        claim.bind(f"\0lakeward-port-{port}")
    except OSError:  # another lakeward process chose it and may not have bound it yet
        claim.close()
        return False
    _claims.append(claim)
    return True


def free_port(host: str, preferred: int, exclude: Sequence[int] = ()) -> int:
    """``preferred`` if it is free, else the next free port above it; claimed (claim_port)."""
    for port in range(preferred, preferred + 200):
        if port not in exclude and claim_port(host, port):
            return port
    raise StackError(f"no free port on {host} between {preferred} and {preferred + 199}")


@dataclass(frozen=True)
class ManagedProcess:
    """One named background process of a stack, e.g. ``metastore-1`` or ``server``."""

    name: str
    run_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.run_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        """The pid if our process is alive; a stale pid file is removed."""
        try:
            record = json.loads(self.pid_file.read_text())
            pid = int(record["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if _start_ticks(pid) != record.get("start"):
            self.pid_file.unlink(missing_ok=True)
            return None
        return pid

    def start(self, command: Sequence[str], env: dict[str, str] | None = None) -> int:
        if self.pid() is not None:
            raise StackError(f"{self.name} is already running (pid file {self.pid_file})")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_file, "ab") as log:
            child = subprocess.Popen(
                list(command),
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=env,
                start_new_session=True,  # survives the CLI; stopped as a group
            )
        record = {"pid": child.pid, "start": _start_ticks(child.pid), "command": list(command)}
        tmp = self.pid_file.with_suffix(".pid.tmp")
        tmp.write_text(json.dumps(record))
        tmp.replace(self.pid_file)
        return child.pid

    def wait_until(self, ready: Callable[[], bool], timeout: float, what: str) -> None:
        """Wait for ``ready()``; fail with the log's tail if the process dies or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.pid() is None:
                raise StackError(
                    f"{self.name} exited while starting; last lines of {self.log_file}:\n"
                    + self.log_tail()
                )
            if ready():
                return
            time.sleep(0.5)
        raise StackError(
            f"{self.name} did not become {what} within {timeout:.0f} s; "
            f"last lines of {self.log_file}:\n{self.log_tail()}"
        )

    def stop(self, timeout: float = 30.0) -> bool:
        """Stop the process group: TERM, then KILL after ``timeout``. False if not running."""
        pid = self.pid()
        if pid is None:
            return False
        for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(pid, sig)
            except ProcessLookupError:
                break
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline and _start_ticks(pid) is not None:
                _reap(pid)
                time.sleep(0.2)
            if _start_ticks(pid) is None:
                break
        self.pid_file.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 15) -> str:
        try:
            text = self.log_file.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join("    " + line for line in text.splitlines()[-lines:])


def _reap(pid: int) -> None:
    """Collect a child that exited, so that it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)


def listens_on(pid: int, port: int) -> bool:
    """Whether process ``pid`` (or a child of its group) holds the socket listening on ``port``.

    A health check that only connects could be answered by another stack's
    server that took the port first; this tells whose socket it is.
    """
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                inodes.add(f"socket:[{inode}]")
    if not inodes:
        return False
    try:
        descriptors = list(Path(f"/proc/{pid}/fd").iterdir())
    except OSError:
        return False
    for descriptor in descriptors:
        try:
            if os.readlink(descriptor) in inodes:
                return True
        except OSError:
            continue
    return False
