"""Bringing a stack up and down: the only place that wires the parts together.

A stack lives in its data dir: ``stack.json`` (the settings it runs with,
ports included, and its outputs), ``run/`` (pid files and logs), ``metastore/``
(the metastore's database and configuration) and, by default, ``lake/``.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from lakeward.config import STATE_FILE_NAME, Settings
from lakeward.errors import ConfigError, LakewardError, StackError
from lakeward.ingest.jhu import COMBINED_TABLE, MEASURES, QUARANTINE_TABLE
from lakeward.metastore.node import DEFAULT_PORT as METASTORE_PORT
from lakeward.metastore.node import MetastoreNode
from lakeward.metastore.uris import metastore_uris
from lakeward.process import ManagedProcess, claim_port, free_port, listens_on
from lakeward.progress import Progress
from lakeward.spark_cluster import DEFAULT_MASTER_PORT as SPARK_MASTER_PORT
from lakeward.spark_cluster import SparkCluster
from lakeward.storage import load_storage
from lakeward.storage.paths import catalog_uri, local_path, public_uri, warehouse_uri

# How long `metastore heal` keeps probing a running node before it restarts it.
HEAL_PATIENCE = 15.0

if TYPE_CHECKING:
    from lakeward.metastore.client import MetastoreClient
    from lakeward.metastore.names import Renamed

SERVER_PORT = 8950
METASTORE_INSTANCE = "metastore"  # the managed database instance `up` creates if none is set
COVID_TABLES = [*(m.table for m in MEASURES), COMBINED_TABLE, QUARANTINE_TABLE]


@dataclass(frozen=True)
class ComponentStatus:
    name: str
    state: str  # running | stopped | unhealthy
    detail: str


def read_state(data_dir: Path) -> dict[str, object]:
    try:
        state: dict[str, object] = json.loads((data_dir / STATE_FILE_NAME).read_text())
    except (OSError, json.JSONDecodeError):
        return {}
    return state


def write_state(settings: Settings, outputs: dict[str, str] | None = None) -> None:
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    state = read_state(settings.data_dir)
    state["settings"] = settings.to_raw()
    if outputs is not None:
        state["outputs"] = outputs
    path = settings.state_file
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=2, sort_keys=True))
    tmp.chmod(0o600)  # it may hold S3 keys
    tmp.replace(path)


def pin_settings(settings: Settings) -> Settings:
    """Fill in what was left open and record it in the stack's state.

    Ports: 9083 (and the next ``metastore.nodes - 1``, all free) and 8950, or
    the next free ones. A database-server backend with neither
    ``metastore.url`` nor ``metastore.instance`` uses the managed instance
    ``metastore`` (``up`` creates it). The API's access key pair:
    generated once, kept in the state file (readable by its owner only).
    """
    metastore, server = settings.metastore, settings.server
    updates: dict[str, object] = {}
    if settings.api.access_key_id is None or settings.api.secret_access_key is None:
        updates["api"] = settings.api.model_copy(
            update={
                "access_key_id": "LKW" + secrets.token_hex(8).upper(),
                "secret_access_key": secrets.token_urlsafe(30),
            }
        )
    if metastore.backend != "derby" and not (metastore.url or metastore.instance):
        metastore = metastore.model_copy(update={"instance": METASTORE_INSTANCE})
        updates["metastore"] = metastore
    if metastore.port is None:
        port = _free_ports(metastore.bind_address, METASTORE_PORT, metastore.nodes)
        updates["metastore"] = metastore.model_copy(update={"port": port})
    if server.port is None:
        pinned_metastore = updates.get("metastore", metastore)
        assert isinstance(pinned_metastore, type(metastore))
        first = pinned_metastore.port or 0
        taken = list(range(first, first + pinned_metastore.nodes))
        updates["server"] = server.model_copy(
            update={"port": free_port(server.host, SERVER_PORT, exclude=taken)}
        )
    spark = settings.spark
    if spark.workers and not spark.master.startswith("spark://"):
        # The stack's own standalone master: its port is kept with the rest.
        port = free_port(spark.cluster_host, SPARK_MASTER_PORT)
        master = f"spark://{spark.cluster_host}:{port}"
        updates["spark"] = spark.model_copy(update={"master": master})
    pinned = settings.model_copy(update=updates)
    write_state(pinned)
    return pinned


def _free_ports(host: str, preferred: int, count: int) -> int:
    """The first port from ``preferred`` on where ``count`` consecutive ports are free."""
    port = free_port(host, preferred)
    while not all(claim_port(host, p) for p in range(port + 1, port + count)):
        port = free_port(host, port + 1)
    return port


def check_reachable(settings: Settings) -> None:
    """Fail early, naming the setting, when a configured place cannot be reached."""
    endpoint = settings.lake.s3_endpoint_url
    if endpoint:
        parsed = urlparse(endpoint)
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
        try:
            socket.create_connection((parsed.hostname or "", port), timeout=5).close()
        except OSError as exc:
            raise ConfigError(
                f"lake.s3_endpoint_url: {endpoint} is unreachable ({exc.strerror or exc})"
            ) from None
    root = local_path(settings.lake_root)
    if root is not None:
        existing = next(p for p in [root, *root.parents] if p.exists())
        if not os.access(existing, os.W_OK):
            raise ConfigError(f"lake.root: {settings.lake_root} is not writable ({existing})")


class Stack:
    def __init__(self, settings: Settings, progress: Progress | None = None) -> None:
        self.settings = settings
        self.progress = progress or Progress()
        self.renamed: Renamed | None = None  # by up: file:// locations given s3:// names

    @property
    def server_process(self) -> ManagedProcess:
        return ManagedProcess("server", self.settings.data_dir / "run")

    def server_url(self) -> str:
        return self.settings.server_url

    def metastore_nodes(self) -> list[MetastoreNode]:
        if self.settings.metastore.port is None:  # never started: no node to speak of
            return []
        return [
            MetastoreNode(self.settings, index=i)
            for i in range(1, self.settings.metastore.nodes + 1)
        ]

    def up(self, covid_source: str | None = None, reload: bool = False) -> dict[str, str]:
        """Start what is not running and load the covid tables if they are missing."""
        check_reachable(self.settings)
        self.settings = pin_settings(self.settings)
        storage = load_storage(self.settings)
        storage.ensure_bucket(self.settings.lake.data_bucket)
        self.start_metastore(heal=True)
        self.start_spark_cluster()
        identities = self.seed_identities()
        self.start_server()
        from lakeward.metastore.client import MetastoreClient

        with MetastoreClient(metastore_uris(self.settings)) as client:
            self.rename_lake_locations(client)
            database = self.settings.covid.database
            loaded = database in client.databases() and set(COVID_TABLES) <= set(
                client.tables(database)
            )
        if reload or not loaded:
            from lakeward.ingest.covid import CovidEtl

            CovidEtl(self.settings, self.progress, storage).run(covid_source)
        outputs = {**self.outputs(), **identities, **self.seed_bi()}
        write_state(self.settings, outputs)
        if self.renamed:
            outputs["renamed_to_s3_names"] = (
                f"{self.renamed.tables} table(s), {self.renamed.partitions} partition(s)"
            )
        return outputs

    def rename_lake_locations(self, client: MetastoreClient) -> None:
        """A stack made with ``file://`` locations has them renamed to ``s3://`` names."""
        from lakeward.metastore.names import rename_lake_locations

        with self.progress.step("s3:// names in the metastore"):
            self.renamed = rename_lake_locations(self.settings, client)

    def seed_identities(self) -> dict[str, str]:
        """The seed's users, groups, policies and their secrets (idempotent)."""
        from lakeward.access.control import AccessControl
        from lakeward.access.seed import seed_identities

        with self.progress.step("users, groups and policies"):
            return seed_identities(self.settings, AccessControl(self.settings))

    def seed_bi(self) -> dict[str, str]:
        """The seed's BI data source, COVID-19 dataset (with its extract) and dashboard."""
        from lakeward.access.control import AccessControl
        from lakeward.bi.seed import seed_bi

        with self.progress.step("BI data source, dataset and dashboard"):
            return seed_bi(self.settings, AccessControl(self.settings))

    def start_metastore(self, heal: bool = False) -> list[str]:
        """Start the nodes that are not running, all at once; the names of those started.

        With ``heal``, a node that runs but does not answer is restarted too.
        """
        self.ensure_database_instance()
        nodes = self.metastore_nodes()
        if heal:
            for node in nodes:
                if node.process.pid() is not None and not node.answers_within(HEAL_PATIENCE):
                    with self.progress.step(f"stop unhealthy {node.process.name}"):
                        node.stop()
        started = []
        with self.progress.step(f"start metastore ({len(nodes)} node(s))"):
            for node in nodes:
                if node.launch():
                    started.append(node)
            for node in started:
                node.wait_ready()
        return [node.process.name for node in started]

    def start_spark_cluster(self) -> None:
        """Start the Spark master and workers ``spark.workers`` asks for (none by default)."""
        if self.settings.spark.workers:
            with self.progress.step(
                f"start Spark master and {self.settings.spark.workers} worker(s)"
            ):
                SparkCluster(self.settings).start()

    def ensure_database_instance(self) -> None:
        """Create (if missing) and start the managed instance ``metastore.instance`` names.

        Like the rest of the stack, the instance is declared by the settings and ``up``
        makes it so; a stopped instance is started.
        """
        metastore = self.settings.metastore
        if metastore.backend == "derby" or metastore.url or metastore.instance is None:
            return
        from lakeward.access.secrets import open_secret_store
        from lakeward.databases import Instances

        with self.progress.step(f"database instance {metastore.instance} ({metastore.backend})"):
            Instances(self.settings, open_secret_store(self.settings)).ensure(
                metastore.instance, metastore.backend
            )

    def failover(self, node: int) -> list[str]:
        """Pin clients to node ``node``: it comes first in every client's list of nodes."""
        count = self.settings.metastore.nodes
        if not 1 <= node <= count:
            raise ConfigError(f"--node: the stack has metastore nodes 1 to {count}, not {node}")
        target = MetastoreNode(self.settings, index=node)
        if not target.healthy():
            raise StackError(
                f"{target.process.name} ({target.uri}) is not healthy; "
                "start it first with: lakeward metastore heal"
            )
        metastore = self.settings.metastore.model_copy(update={"preferred_node": node})
        self.settings = self.settings.model_copy(update={"metastore": metastore})
        write_state(self.settings)
        return metastore_uris(self.settings)

    def start_server(self) -> None:
        process = self.server_process
        if process.pid() is not None and self._server_healthy():
            return
        process.stop()
        data_dir = str(self.settings.data_dir)
        command = [sys.executable, "-m", "lakeward", "serve", "--data-dir", data_dir]
        with self.progress.step(f"start server ({self.server_url()})"):
            process.start(command)
            # Every worker imports and builds the application at once: on a busy
            # machine that takes a while.
            process.wait_until(self._server_healthy, 180, "ready")

    def _server_healthy(self) -> bool:
        pid = self.server_process.pid()
        if pid is None or not listens_on(pid, self.settings.server.port or 0):
            return False  # whatever answers on the port, it is not our server
        import httpx  # here: `lakeward status` of a stopped stack never needs it

        try:
            return httpx.get(f"{self.server_url()}/health", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def outputs(self) -> dict[str, str]:
        settings = self.settings
        database = settings.covid.database
        return {
            "data_dir": str(settings.data_dir),
            "lake_root": settings.lake_root,
            "data_bucket": settings.lake.data_bucket,
            # The names the metastore and every tool use (s3://... on the embedded lake too).
            "data_bucket_uri": public_uri(settings, settings.lake.data_bucket),
            "warehouse_uri": catalog_uri(settings, warehouse_uri(settings)),
            "metastore_uris": ",".join(metastore_uris(settings)),
            "metastore_backend": settings.metastore.backend,
            "spark_master": settings.spark.master,
            "server_url": self.server_url(),
            "console_url": f"{self.server_url()}/console/",
            "athena_endpoint": self.server_url(),
            # Athena and S3 answer at the one address every AWS SDK reads from this variable.
            "aws_endpoint_url": self.server_url(),
            "data_catalog": "demo_hive_metastore",
            "api_access_key_id": settings.api.access_key_id or "",
            "tables": ",".join(f"{database}.{t}" for t in COVID_TABLES),
            "metastore_logs": ",".join(str(n.process.log_file) for n in self.metastore_nodes()),
            "server_log": str(self.server_process.log_file),
        }

    def status(self) -> list[ComponentStatus]:
        result = []
        for node in self.metastore_nodes():
            status = node.status()
            state = (
                "stopped" if status.pid is None else "running" if status.healthy else "unhealthy"
            )
            result.append(ComponentStatus(status.name, state, f"{status.uri} pid {status.pid}"))
        if self.settings.spark.workers:
            cluster = SparkCluster(self.settings)
            seen = cluster.status()
            state = "stopped" if cluster.master_process.pid() is None else "unhealthy"
            if seen is not None and seen.alive_workers >= self.settings.spark.workers:
                state = "running"
            workers = seen.alive_workers if seen else 0
            detail = f"{self.settings.spark.master}, {workers} worker(s) alive"
            result.append(ComponentStatus("spark cluster", state, detail))
        pid = self.server_process.pid()
        healthy = pid is not None and self._server_healthy()
        state = "stopped" if pid is None else "running" if healthy else "unhealthy"
        result.append(ComponentStatus("server", state, f"{self.server_url()} pid {pid}"))
        if pid is not None:
            from lakeward.http.supervisor import read_workers

            for worker in read_workers(self.settings):
                detail = f"{worker['state']}, pid {worker['pid']}, restarts {worker['restarts']}"
                worker_state = "running" if worker["state"] == "running" else "unhealthy"
                result.append(
                    ComponentStatus(f"server worker {worker['index']}", worker_state, detail)
                )
        return result

    def stop_metastore(self) -> dict[str, bool]:
        """Stop every node, also those left over from a larger ``metastore.nodes``."""
        nodes = self.metastore_nodes()
        if nodes:
            run_dir = nodes[0].process.run_dir
            suffixes = [p.stem.rpartition("-")[2] for p in run_dir.glob("metastore-*.pid")]
            counts = [int(s) for s in suffixes if s.isdigit()]
            extra = range(len(nodes) + 1, max(counts, default=0) + 1)
            nodes += [MetastoreNode(self.settings, index=i) for i in extra]
        return {node.process.name: node.stop() for node in nodes}

    def stop_database_instances(self) -> None:
        """Stop the data dir's local database servers (``up`` starts the metastore's again)."""
        if (self.settings.data_dir / "databases").is_dir():
            from lakeward.access.secrets import open_secret_store
            from lakeward.databases import Instances

            Instances(self.settings, open_secret_store(self.settings)).stop_all()

    def down(self, retain_data: bool = False) -> None:
        """Stop every process; unless ``retain_data``, delete the stack's data too."""
        self.server_process.stop()
        SparkCluster(self.settings).stop()
        self.stop_metastore()
        self.stop_database_instances()
        if retain_data:
            return
        if local_path(self.settings.lake_root) is None:  # not in the data dir: emptied here
            try:
                load_storage(self.settings).delete_prefix(self.settings.lake.data_bucket, "")
            except LakewardError as exc:
                raise StackError(f"stopped, but deleting the lake's data failed: {exc}") from None
        directory = self.settings.data_dir
        if directory.is_dir():
            if not (directory / STATE_FILE_NAME).is_file():
                raise StackError(f"{directory} does not hold a lakeward stack; not deleting it")
            shutil.rmtree(directory)
