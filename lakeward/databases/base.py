"""What every database engine provides to managed instances, and the account servers run as.

An ``Engine`` knows its server binaries (which versions are installed), how to
make a data directory with the engine's own tools, how to write an instance
class into the server's configuration, and how to talk to a running server
(version, databases, dumps). ``Instances`` does the bookkeeping around it.
"""

from __future__ import annotations

import functools
import os
import pwd
import re
import signal
import stat
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from urllib.parse import quote

from lakeward.databases.classes import InstanceClass
from lakeward.errors import InvalidRequest, StackError

LOCALHOST = "127.0.0.1"


@dataclass(frozen=True)
class Endpoint:
    host: str
    port: int

    def __str__(self) -> str:
        return f"{self.host}:{self.port}"

    @classmethod
    def parse(cls, text: str) -> Endpoint:
        host, sep, port = text.rpartition(":")
        if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise InvalidRequest(f"endpoint {text!r} is not HOST:PORT (e.g. 127.0.0.1:5432)")
        return cls(host.strip("[]"), int(port))


@dataclass(frozen=True)
class MasterCredentials:
    username: str
    password: str = field(repr=False)


@dataclass(frozen=True)
class Account:
    """The unprivileged system account a server runs as when lakeward runs as root.

    PostgreSQL refuses to run as root, and MariaDB should not: as root, lakeward
    runs each server (and its init tool) as the account Debian's packages made
    for it (``postgres``, ``mysql``), through ``setpriv``, over a data directory
    that account owns.
    """

    name: str
    uid: int
    gid: int

    @classmethod
    def for_server(cls, name: str) -> Account | None:
        """The account to run as, or None when lakeward does not run as root."""
        if os.geteuid() != 0:
            return None
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            raise StackError(
                f"lakeward runs as root, and database servers are run as the system account "
                f"{name!r}, which does not exist; install the server package (it creates "
                f"the account) or run lakeward as an ordinary user"
            ) from None
        return cls(name, entry.pw_uid, entry.pw_gid)

    def command(self, argv: Sequence[str]) -> list[str]:
        return [
            "setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--init-groups", "--", *argv,
        ]  # fmt: skip

    def give(self, path: Path) -> None:
        os.chown(path, self.uid, self.gid)

    def check_reachable(self, directory: Path) -> None:
        """Fail, naming the directory at fault, when the account cannot get to ``directory``."""
        groups = set(os.getgrouplist(self.name, self.gid))
        for parent in reversed(directory.absolute().parents):
            info = parent.stat()
            if info.st_uid == self.uid:
                bit = stat.S_IXUSR
            elif info.st_gid in groups:
                bit = stat.S_IXGRP
            else:
                bit = stat.S_IXOTH
            if not info.st_mode & bit:
                raise StackError(
                    f"the database server would run as the system account {self.name!r} "
                    f"(lakeward runs as root), and {self.name!r} cannot enter {parent} "
                    f"(mode {stat.S_IMODE(info.st_mode):o}); choose a data dir it can reach, "
                    f"let it in (chmod o+x {parent}), or run lakeward as an ordinary user"
                )


@functools.cache
def binary_version(binary: Path, pattern: str) -> str | None:
    """The version a server binary reports with ``--version`` (the first group of ``pattern``)."""
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    except OSError:
        return None
    match = re.search(pattern, out.stdout)
    return match.group(1) if match else None


def replace_config_file(target: Path, lines: list[str], account: Account | None) -> None:
    """Replace a server's config file whole; readable by the server, writable by us only."""
    tmp = target.with_name(target.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tmp.chmod(0o644)  # MariaDB ignores a world-writable config file
    if account:
        account.give(tmp)
    tmp.replace(target)


def run_tool(
    argv: Sequence[str],
    what: str,
    *,
    account: Account | None = None,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 300,
) -> str:
    """Run one of the engine's tools; fail with the last lines of its output."""
    command = account.command(argv) if account else list(argv)
    try:
        done = subprocess.run(
            command,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
            check=False,
        )
    except FileNotFoundError:
        raise StackError(f"{what}: {command[0]} is not installed") from None
    except subprocess.TimeoutExpired:
        raise StackError(
            f"{what}: {Path(argv[0]).name} did not finish in {timeout:.0f} s"
        ) from None
    if done.returncode != 0:
        lines = (done.stdout + done.stderr).strip().splitlines()[-15:]
        raise StackError(
            f"{what}: {Path(argv[0]).name} failed (exit {done.returncode}):\n"
            + "\n".join("    " + line for line in lines)
        )
    return done.stdout


class Engine(ABC):
    """One database engine family; ``name`` is the engine as the user asked for it."""

    server_name: str  # the server that really runs: PostgreSQL, MariaDB
    default_port: int  # the first port tried for a local instance
    default_master: str  # RDS's default master user name for the engine
    server_account: str  # who the server runs as when lakeward runs as root
    shutdown_signal: signal.Signals = signal.SIGTERM
    url_scheme: str  # of connection_url's URLs

    def __init__(self, name: str) -> None:
        self.name = name

    # -- binaries -----------------------------------------------------------

    @abstractmethod
    def installed(self) -> dict[str, str]:
        """Installed server versions: major version -> full version (e.g. "15" -> "15.14")."""

    def pick_version(self, wanted: str | None) -> str:
        """The major version to run: the newest installed, or the one ``wanted`` names."""
        installed = self.installed()
        if not installed:
            raise StackError(self.missing_binaries())
        if wanted is None:
            return max(installed, key=_version_key)
        for major, full in sorted(
            installed.items(), key=lambda i: _version_key(i[0]), reverse=True
        ):
            if wanted in (major, full) or full.startswith(wanted + "."):
                return major
        available = ", ".join(f"{m} ({full})" for m, full in sorted(installed.items()))
        raise InvalidRequest(
            f"engine version {wanted!r} of {self.name} is not installed; available: {available}"
            + self.version_note()
        )

    def version_note(self) -> str:
        return ""

    @abstractmethod
    def missing_binaries(self) -> str:
        """What to install when no server binaries are found."""

    # -- a local server -----------------------------------------------------

    @abstractmethod
    def initialize(
        self, root: Path, major: str, master: MasterCredentials, account: Account | None
    ) -> None:
        """Make the data directory ``root/data`` with the engine's tools; create the master user."""

    @abstractmethod
    def write_config(
        self, root: Path, major: str, port: int, klass: InstanceClass, account: Account | None
    ) -> None:
        """Write the port, the address and the class's resource settings into the config."""

    @abstractmethod
    def class_settings(self, klass: InstanceClass) -> dict[str, str]:
        """The server settings an instance class stands for."""

    @abstractmethod
    def server_command(self, root: Path, major: str) -> list[str]:
        """The command that runs the server in the foreground."""

    @abstractmethod
    def ready(self, root: Path, major: str, port: int) -> bool:
        """Whether the server accepts connections."""

    # -- any server, local or registered ------------------------------------

    @abstractmethod
    def server_version(self, endpoint: Endpoint, master: MasterCredentials) -> str:
        """Log in and return the server's version; a clear error if that fails."""

    @abstractmethod
    def ensure_database(self, endpoint: Endpoint, master: MasterCredentials, name: str) -> None:
        """Create the database ``name`` unless it exists."""

    @abstractmethod
    def dump(self, endpoint: Endpoint, master: MasterCredentials, target: Path) -> None:
        """Dump every user database of the server into the SQL file ``target``."""

    def url(self, endpoint: Endpoint, master: MasterCredentials, database: str) -> str:
        """A database URL with the master credentials."""
        user, password = quote(master.username, safe=""), quote(master.password, safe="")
        return f"{self.url_scheme}://{user}:{password}@{endpoint}/{database}"


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


# engine name -> module:class, imported when used
ENGINES = {
    "postgres": "lakeward.databases.postgres:PostgresEngine",
    "mysql": "lakeward.databases.mariadb:MariadbEngine",
    "mariadb": "lakeward.databases.mariadb:MariadbEngine",
}


def load_engine(name: str) -> Engine:
    if name not in ENGINES:
        raise InvalidRequest(f"unknown engine {name!r}; use one of {', '.join(ENGINES)}")
    module_name, _, class_name = ENGINES[name].partition(":")
    engine_class: type[Engine] = getattr(import_module(module_name), class_name)
    return engine_class(name)
