"""Managed database instances (the RDS analogue): the service behind ``lakeward db``.

An instance is either a local server made in ``<data dir>/databases/<name>/``
with the engine's own tools, listening on 127.0.0.1 on a port of its own, or
an existing server registered with its endpoint. Records live in the registry
(``registry.py``); master credentials live in the secrets store, encrypted,
under ``databases/<name>/master``.
"""

from __future__ import annotations

import contextlib
import re
import secrets
import shutil
import string
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from lakeward.databases.base import (
    LOCALHOST,
    Account,
    Endpoint,
    Engine,
    MasterCredentials,
    load_engine,
)
from lakeward.databases.classes import DEFAULT_CLASS, InstanceClass
from lakeward.databases.classes import instance_class as lookup_class
from lakeward.databases.local import LocalServer
from lakeward.databases.maintenance import parse_window
from lakeward.databases.registry import InstanceInfo, InstanceRecord, Registry
from lakeward.errors import InvalidRequest, LakewardError, ResourceNotFound, StackError
from lakeward.process import free_port, port_is_free

if TYPE_CHECKING:
    from lakeward.access.secrets import SecretStore
    from lakeward.config import Settings

# RDS's rule for instance identifiers.
_NAME = re.compile(r"^[a-z](?:[a-z0-9]|-(?!-)){0,62}(?<!-)$")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,31}$")
_DATABASE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_PASSWORD_ALPHABET = string.ascii_letters + string.digits


class Instances:
    def __init__(
        self,
        settings: Settings,
        secrets: SecretStore,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        self.settings = settings
        self.directory = settings.data_dir / "databases"
        self.registry = Registry(self.directory)
        self.window = parse_window(settings.databases.maintenance_window)
        self.clock = clock or (lambda: datetime.now(UTC))
        self.secrets = secrets  # master credentials of the instances, encrypted

    # -- create -------------------------------------------------------------

    def create(
        self,
        name: str,
        engine: str,
        engine_version: str | None = None,
        instance_class: str = DEFAULT_CLASS,
        endpoint: str | Endpoint | None = None,
        *,
        port: int | None = None,
        master_username: str | None = None,
        master_password: str | None = None,
    ) -> InstanceInfo:
        """A new local instance, or (with ``endpoint``) a registered existing server."""
        _check_name(name)
        eng = load_engine(engine)
        if endpoint is not None:
            where = Endpoint.parse(endpoint) if isinstance(endpoint, str) else endpoint
            return self._register(
                name, eng, where, engine_version, master_username, master_password
            )
        klass = lookup_class(instance_class)
        major = eng.pick_version(engine_version)
        username = master_username or eng.default_master
        if not _USER.match(username):
            raise InvalidRequest(f"master user name {username!r}: use 1-32 letters, digits and _")
        account = Account.for_server(eng.server_account)
        with self.registry.locked():
            self._check_free(name)
            chosen = self._pick_port(port, eng)
            root = self.directory / name
            if root.exists():
                raise StackError(
                    f"{root} exists but belongs to no instance (left by an interrupted create?); "
                    "move it away and try again"
                )
            if account:
                account.check_reachable(root)
            master = MasterCredentials(username, _generate_password())
            record = InstanceRecord(
                name=name, engine=engine, engine_version=major,
                server=f"{eng.server_name} {eng.installed()[major]}", instance_class=klass.name,
                host=LOCALHOST, port=chosen, local=True, status="creating",
                master_username=username, secret=_secret_name(name), created=_iso(self.clock()),
            )  # fmt: skip
            self.registry.save(record)
            server = LocalServer(root, eng, major, chosen)
            with self._failing(record, server):
                root.mkdir()
                self._store_master(record, master)
                eng.initialize(root, major, master, account)
                eng.write_config(root, major, chosen, klass, account)
                server.start(account)
                self._set(record, "available")
            return self._info(record)

    def _register(
        self,
        name: str,
        eng: Engine,
        endpoint: Endpoint,
        engine_version: str | None,
        username: str | None,
        password: str | None,
    ) -> InstanceInfo:
        if not username:
            raise InvalidRequest(
                f"registering the server at {endpoint} needs its master user name and password"
            )
        master = MasterCredentials(username, password or "")
        server = eng.server_version(endpoint, master)  # also proves the credentials
        version = server.split()[1]
        if engine_version and not (
            version == engine_version or version.startswith(engine_version + ".")
        ):
            raise InvalidRequest(
                f"the server at {endpoint} runs {server}, not engine version {engine_version}"
            )
        with self.registry.locked():
            self._check_free(name)
            record = InstanceRecord(
                name=name, engine=eng.name, engine_version=version, server=server,
                instance_class=None, host=endpoint.host, port=endpoint.port, local=False,
                status="available", master_username=username, secret=_secret_name(name),
                created=_iso(self.clock()),
            )  # fmt: skip
            self._store_master(record, master)
            self.registry.save(record)
        return self._info(record)

    # -- look -----------------------------------------------------------------

    def describe(self, name: str | None = None) -> list[InstanceInfo]:
        """One instance, or all; modifications whose window has come are applied first."""
        if name is not None:
            self.registry.get(name)
        with self.registry.locked(blocking=False) as got:
            if got:  # if another command holds the lock, it is busy with the instances anyway
                self.maintain(name)
        records = self.registry.load()
        chosen = [records[name]] if name is not None else list(records.values())
        return [self._info(r) for r in chosen]

    def credentials(self, name: str) -> MasterCredentials:
        record = self.registry.get(name)
        value = self.secrets.get(record.secret).value
        return MasterCredentials(value["username"], value["password"])

    def endpoint(self, name: str) -> Endpoint:
        record = self.registry.get(name)
        return Endpoint(record.host, record.port)

    def connection_url(self, name: str, database: str) -> str:
        """A URL with the master credentials; ``database`` is created in the instance if missing.

        PostgreSQL: ``postgresql://user:pw@host:port/db`` (SQLAlchemy 2.1 uses psycopg 3).
        MySQL/MariaDB: ``mysql://user:pw@host:port/db`` (for SQLAlchemy with PyMySQL, write
        ``mysql+pymysql://``).
        """
        if not _DATABASE.match(database):
            raise InvalidRequest(f"database name {database!r}: use letters, digits and _")
        record = self.registry.get(name)
        info = self._info(record)
        if info.status != "available":
            why = f"; {info.status_reason}" if info.status_reason else ""
            raise StackError(f"database instance {name} is {info.status}{why}")
        eng, master = load_engine(record.engine), self.credentials(name)
        endpoint = Endpoint(record.host, record.port)
        eng.ensure_database(endpoint, master, database)
        return eng.url(endpoint, master, database)

    # -- change -------------------------------------------------------------

    def modify(
        self, name: str, instance_class: str, apply_immediately: bool = False
    ) -> InstanceInfo:
        klass = lookup_class(instance_class)
        with self.registry.locked():
            record = self._local(name, "modify")
            if record.status not in ("available", "stopped"):
                raise InvalidRequest(
                    f"database instance {name} is {record.status}; try again later"
                )
            if klass.name == record.instance_class:
                record.pending, record.pending_since = {}, None
                self.registry.save(record)
            elif apply_immediately:
                self._apply_class(record, klass)
            else:
                record.pending = {"instance_class": klass.name}
                record.pending_since = _iso(self.clock())
                self.registry.save(record)
            return self._info(record)

    def maintain(self, name: str | None = None) -> list[str]:
        """Apply the pending modifications whose maintenance window has come; their names."""
        applied = []
        now = self.clock()
        with self.registry.locked():
            for record in self.registry.load().values():
                if (
                    name not in (None, record.name)
                    or not record.pending
                    or not record.pending_since
                ):
                    continue
                if record.status in ("available", "stopped") and self.window.due(
                    datetime.fromisoformat(record.pending_since), now
                ):
                    self._apply_class(record, lookup_class(record.pending["instance_class"]))
                    applied.append(record.name)
        return applied

    def _apply_class(self, record: InstanceRecord, klass: InstanceClass) -> None:
        """Write the class into the config; restart a running server with it (a short outage)."""
        eng = load_engine(record.engine)
        server = self._server(record)
        running = server.running()
        account = Account.for_server(eng.server_account)
        self._set(record, "modifying")
        with self._failing(record, server):
            eng.write_config(server.root, record.engine_version, record.port, klass, account)
            if running:
                server.stop()
                server.start(account)
            record.instance_class = klass.name
            record.pending, record.pending_since = {}, None
            self._set(record, "available" if running else "stopped")

    def start(self, name: str) -> InstanceInfo:
        with self.registry.locked():
            record = self._local(name, "start")
            if record.status in ("creating", "deleting"):
                raise InvalidRequest(
                    f"database instance {name} is {record.status}; it cannot start"
                )
            server = self._server(record)
            account = Account.for_server(load_engine(record.engine).server_account)
            with self._failing(record, server):
                server.start(account)
            self._set(record, "available")
            return self._info(record)

    def stop(self, name: str) -> InstanceInfo:
        with self.registry.locked():
            record = self._local(name, "stop")
            if record.status not in ("available", "stopped"):
                raise InvalidRequest(f"database instance {name} is {record.status}; it cannot stop")
            self._server(record).stop()
            self._set(record, "stopped")
            return self._info(record)

    def stop_all(self) -> list[str]:
        """Stop every local server (as ``lakeward down`` should); the names of those stopped."""
        stopped = []
        with self.registry.locked():
            for record in self.registry.load().values():
                if record.local and self._server(record).stop():
                    if record.status == "available":
                        self._set(record, "stopped")
                    stopped.append(record.name)
        return stopped

    def ensure(self, name: str, engine: str) -> InstanceInfo:
        """The instance ``name``, created if missing and started if stopped, once available."""
        with self.registry.locked():
            if name not in self.registry.load():
                return self.create(name, engine)
            record = self.registry.get(name)
            if record.engine != engine:
                raise InvalidRequest(
                    f"database instance {name} runs engine {record.engine}, not {engine}"
                )
            self.maintain(name)
            record = self.registry.get(name)
            if record.status == "failed":
                raise StackError(
                    f"database instance {name} failed: {record.status_reason} "
                    f"(see {self._server(record).log}; delete it and create it again)"
                )
            if record.local and not self._server(record).running():
                return self.start(name)
            return self._info(record)

    def delete(self, name: str, final_snapshot: Path | None) -> None:
        """Delete the instance, after dumping it into ``final_snapshot`` if given.

        A registered server is only forgotten: lakeward never stops or deletes it.
        """
        with self.registry.locked():
            record = self.registry.get(name)
            if final_snapshot is not None:
                self._snapshot(record, final_snapshot)
            self._set(record, "deleting")
            if record.local:
                server = self._server(record)
                server.stop()
                shutil.rmtree(server.root, ignore_errors=True)
            with contextlib.suppress(ResourceNotFound):
                self.secrets.delete(record.secret)
            self.registry.remove(name)

    def _snapshot(self, record: InstanceRecord, target: Path) -> None:
        target = target.absolute()
        if target.exists():
            raise InvalidRequest(f"final snapshot {target} exists; name a new file")
        if not target.parent.is_dir():
            raise InvalidRequest(
                f"final snapshot {target}: the directory {target.parent} is missing"
            )
        eng = load_engine(record.engine)
        server = self._server(record) if record.local else None
        started = False
        if server is not None and not server.running():  # a stopped instance is started to dump it
            if record.status == "failed":
                raise StackError(f"database instance {record.name} failed; it cannot be dumped")
            server.start(Account.for_server(eng.server_account))
            started = True
        partial = target.with_name(f".{target.name}.partial")
        try:
            eng.dump(Endpoint(record.host, record.port), self.credentials(record.name), partial)
            partial.replace(target)
        finally:
            partial.unlink(missing_ok=True)
            if started and server is not None:
                server.stop()

    # -- internals ----------------------------------------------------------

    def _check_free(self, name: str) -> None:
        taken = self.registry.load().get(name)
        if taken is not None:
            raise InvalidRequest(
                f"a database instance named {name} exists already ({taken.engine}, {taken.status})"
            )

    def _pick_port(self, wanted: int | None, eng: Engine) -> int:
        assigned = {r.port: r.name for r in self.registry.load().values() if r.local}
        if wanted is None:
            return free_port(LOCALHOST, eng.default_port, exclude=list(assigned))
        if wanted in assigned:
            raise InvalidRequest(f"port {wanted} is taken by database instance {assigned[wanted]}")
        if not port_is_free(LOCALHOST, wanted):
            raise InvalidRequest(f"port {wanted} on {LOCALHOST} is taken by another process")
        return wanted

    def _store_master(self, record: InstanceRecord, master: MasterCredentials) -> None:
        self.secrets.put(
            record.secret,
            {
                "engine": record.engine,
                "host": record.host,
                "port": record.port,
                "username": master.username,
                "password": master.password,
                "dbInstanceIdentifier": record.name,
            },  # fmt: skip
            description=f"master user of database instance {record.name}",
        )

    def _local(self, name: str, action: str) -> InstanceRecord:
        record = self.registry.get(name)
        if not record.local:
            raise InvalidRequest(
                f"database instance {name} is a server registered at {record.host}:{record.port}; "
                f"lakeward does not {action} it"
            )
        return record

    def _server(self, record: InstanceRecord) -> LocalServer:
        eng = load_engine(record.engine)
        return LocalServer(self.directory / record.name, eng, record.engine_version, record.port)

    def _set(self, record: InstanceRecord, status: str, reason: str = "") -> None:
        record.status, record.status_reason = status, reason
        self.registry.save(record)

    @contextlib.contextmanager
    def _failing(self, record: InstanceRecord, server: LocalServer) -> Iterator[None]:
        """On an error: record the instance as failed, with the reason, and stop its server."""
        try:
            yield
        except BaseException as exc:
            server.stop()
            reason = (
                exc.message if isinstance(exc, LakewardError) else f"{type(exc).__name__}: {exc}"
            )
            self._set(record, "failed", reason.splitlines()[0])
            raise

    def _info(self, record: InstanceRecord) -> InstanceInfo:
        status, reason = record.status, record.status_reason
        log = None
        if record.local:
            server = self._server(record)
            log = server.log
            if status == "available" and not server.running():
                status = "stopped"
                reason = (
                    "the server is not running (stopped outside lakeward, or the machine "
                    f"restarted); start it with: lakeward db start {record.name}"
                )
        since = record.pending_since
        return InstanceInfo(
            name=record.name, engine=record.engine, engine_version=record.engine_version,
            server=record.server, instance_class=record.instance_class,
            endpoint=Endpoint(record.host, record.port), status=status, status_reason=reason,
            pending_modifications=dict(record.pending),
            maintenance_window=self.window.text,
            next_maintenance=self.window.next_start(datetime.fromisoformat(since))
            if since
            else None,
            local=record.local, master_username=record.master_username,
            created=datetime.fromisoformat(record.created), log=log,
        )  # fmt: skip


def _check_name(name: str) -> None:
    if not _NAME.match(name):
        raise InvalidRequest(
            f"invalid instance name {name!r}: 1-63 lower-case letters, digits and hyphens, "
            "starting with a letter, without two hyphens in a row or one at the end"
        )


def _secret_name(name: str) -> str:
    return f"databases/{name}/master"


def _generate_password() -> str:
    return "".join(secrets.choice(_PASSWORD_ALPHABET) for _ in range(32))


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat()
