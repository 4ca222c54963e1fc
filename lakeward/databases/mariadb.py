"""MariaDB instances, for the engines ``mariadb`` and ``mysql``.

Debian ships MariaDB's server and no MySQL server, so a ``mysql`` instance runs
MariaDB (wire-compatible with MySQL clients and drivers); ``describe`` says so
in its ``server`` column. A registered ``mysql`` endpoint may be a real MySQL.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import Any

from lakeward.databases.base import (
    LOCALHOST,
    Account,
    Endpoint,
    Engine,
    MasterCredentials,
    binary_version,
    replace_config_file,
    run_tool,
)
from lakeward.databases.classes import InstanceClass
from lakeward.errors import InvalidRequest

SYSTEM_SCHEMAS = ("mysql", "information_schema", "performance_schema", "sys")
_SOCKET_MAX = 100  # a Unix socket path is at most 107 bytes


def _find(name: str, fallback: str) -> Path | None:
    found = shutil.which(name) or (fallback if Path(fallback).is_file() else None)
    return Path(found) if found else None


def _quote(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


class MariadbEngine(Engine):
    server_name = "MariaDB"
    default_port = 3307  # 3306 is usually the machine's own server
    default_master = "admin"
    server_account = "mysql"
    url_scheme = "mysql"  # for SQLAlchemy with PyMySQL: mysql+pymysql://

    @property
    def mariadbd(self) -> Path | None:
        return _find("mariadbd", "/usr/sbin/mariadbd")

    @property
    def install_db(self) -> Path | None:
        return _find("mariadb-install-db", "/usr/bin/mariadb-install-db")

    def installed(self) -> dict[str, str]:
        binary = self.mariadbd
        full = (
            binary_version(binary, r"Ver (\d+\.\d+\.\d+)") if binary and self.install_db else None
        )
        return {full.rsplit(".", 1)[0]: full} if full else {}

    def version_note(self) -> str:
        if self.name == "mysql":
            return " (the mysql engine runs MariaDB's server: Debian ships no MySQL server)"
        return ""

    def missing_binaries(self) -> str:
        return (
            "no MariaDB server binaries (mariadbd, mariadb-install-db); install them "
            "(apt-get install mariadb-server, or ./dev.sh install)"
        )

    def initialize(
        self, root: Path, major: str, master: MasterCredentials, account: Account | None
    ) -> None:
        data = root / "data"
        data.mkdir(mode=0o700)
        if account:
            account.give(data)
        run_tool(
            [
                str(self.install_db),
                "--no-defaults",
                f"--datadir={data}",
                "--skip-test-db",
                "--auth-root-authentication-method=socket",
            ],  # fmt: skip
            "mariadb-install-db",
            account=account,
        )
        # The master user, through the server's bootstrap mode: the password goes
        # down a pipe, never into a file or a command line.
        user, password = _quote(master.username), _quote(master.password)
        statements = ["FLUSH PRIVILEGES;"]
        for host in ("'127.0.0.1'", "'localhost'"):
            statements += [
                f"CREATE USER {user}@{host} IDENTIFIED BY {password};",
                f"GRANT ALL PRIVILEGES ON *.* TO {user}@{host} WITH GRANT OPTION;",
            ]
        run_tool(
            [
                str(self.mariadbd),
                "--no-defaults",
                f"--datadir={data}",
                "--bootstrap",
                "--skip-networking",
                "--log-warnings=0",
            ],  # fmt: skip
            "creating the master user",
            account=account,
            input="\n".join(statements) + "\n",
        )

    def class_settings(self, klass: InstanceClass) -> dict[str, str]:
        return {
            "innodb_buffer_pool_size": f"{klass.buffer_mb}M",
            "max_connections": str(klass.max_connections),
            "sort_buffer_size": f"{klass.work_mem_mb}M",
            "tmp_table_size": f"{klass.work_mem_mb}M",
            "max_heap_table_size": f"{klass.work_mem_mb}M",
        }

    def _socket(self, root: Path, port: int) -> Path:
        socket = root / "data" / "mariadbd.sock"
        if len(str(socket)) <= _SOCKET_MAX:
            return socket
        return Path(tempfile.gettempdir()) / f"lakeward-mariadbd-{port}.sock"

    def write_config(
        self, root: Path, major: str, port: int, klass: InstanceClass, account: Account | None
    ) -> None:
        settings = {
            "datadir": str(root / "data"),
            "port": str(port),
            "bind-address": LOCALHOST,
            "socket": str(self._socket(root, port)),
            "pid-file": str(root / "data" / "mariadbd.pid"),
            "skip-name-resolve": "ON",
            **self.class_settings(klass),
        }
        lines = [f"# instance class {klass.name}: {klass.summary}", "[mariadbd]"]
        lines += [f"{key} = {value}" for key, value in settings.items()]
        replace_config_file(root / "my.cnf", lines, account)

    def server_command(self, root: Path, major: str) -> list[str]:
        return [str(self.mariadbd), f"--defaults-file={root / 'my.cnf'}"]

    def ready(self, root: Path, major: str, port: int) -> bool:
        return True  # MariaDB listens only once it accepts connections

    # -- any server ---------------------------------------------------------

    def _connect(self, endpoint: Endpoint, master: MasterCredentials) -> Any:
        import pymysql  # type: ignore[import-untyped]

        try:
            return pymysql.connect(
                host=endpoint.host,
                port=endpoint.port,
                user=master.username,
                password=master.password,
                connect_timeout=5,
                autocommit=True,
            )
        except pymysql.err.OperationalError as exc:
            reason = exc.args[1] if len(exc.args) > 1 else str(exc)
            raise InvalidRequest(
                f"cannot log in to {self.server_name} at {endpoint} as {master.username}: {reason}"
            ) from None

    def server_version(self, endpoint: Endpoint, master: MasterCredentials) -> str:
        conn = self._connect(endpoint, master)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SELECT VERSION()")
                version: str = cursor.fetchone()[0]
        finally:
            conn.close()
        number = version.split("-")[0]
        return f"MariaDB {number}" if "mariadb" in version.lower() else f"MySQL {number}"

    def ensure_database(self, endpoint: Endpoint, master: MasterCredentials, name: str) -> None:
        conn = self._connect(endpoint, master)
        try:
            with conn.cursor() as cursor:
                cursor.execute(f"CREATE DATABASE IF NOT EXISTS `{name}`")
        finally:
            conn.close()

    def dump(self, endpoint: Endpoint, master: MasterCredentials, target: Path) -> None:
        conn = self._connect(endpoint, master)
        try:
            with conn.cursor() as cursor:
                cursor.execute("SHOW DATABASES")
                names = [r[0] for r in cursor.fetchall() if r[0].lower() not in SYSTEM_SCHEMAS]
        finally:
            conn.close()
        if not names:
            target.write_text(f"-- {endpoint}: no databases besides the system schemas\n")
            return
        run_tool(
            [
                "mariadb-dump",
                "-h",
                endpoint.host,
                "-P",
                str(endpoint.port),
                "-u",
                master.username,
                "--single-transaction",
                "--routines",
                "--events",
                "--triggers",
                f"--result-file={target}",
                "--databases",
                *names,
            ],  # fmt: skip
            "final snapshot",
            env={"MYSQL_PWD": master.password},
        )
