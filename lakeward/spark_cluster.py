"""A Spark standalone cluster the stack starts on this machine: a master and its workers.

With ``spark.workers`` above 0, ``up`` starts a master (``spark://<host>:<port>``, pinned
in the stack's state as ``spark.master``) and that many workers, from the Spark inside the
pyspark wheel; the ETL and the Spark workgroup then run their jobs on it. Executors reach
the lake as the driver does, by its s3:// names through the stack's S3 endpoint, so the
same settings serve workers on other machines (start those with Spark's own scripts and
give ``spark.master``).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.error import URLError
from urllib.request import urlopen

from lakeward.config import Settings
from lakeward.errors import StackError
from lakeward.jvm import find_java, java_env, spark_home
from lakeward.process import ManagedProcess, free_port

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
DEFAULT_MASTER_PORT = 7077


@dataclass(frozen=True)
class ClusterStatus:
    master: str
    alive_workers: int


class SparkCluster:
    """The master and workers of one stack (pid files and logs in ``<data dir>/run``)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.run_dir = settings.data_dir / "run"

    @property
    def host(self) -> str:
        return self.settings.spark.cluster_host

    @property
    def master_process(self) -> ManagedProcess:
        return ManagedProcess("spark-master", self.run_dir)

    def worker_processes(self, count: int | None = None) -> list[ManagedProcess]:
        count = self.settings.spark.workers if count is None else count
        return [ManagedProcess(f"spark-worker-{i}", self.run_dir) for i in range(1, count + 1)]

    def master_port(self) -> int:
        master = self.settings.spark.master
        if not master.startswith("spark://"):
            raise StackError(f"spark.master is {master}, not the stack's standalone master")
        return int(master.rsplit(":", 1)[1])

    @property
    def web_port_file(self) -> Path:
        return self.run_dir / "spark-master.webui"

    def web_port(self) -> int | None:
        """The port of the master's web UI (chosen free when it started), whose JSON says
        which workers are alive; None before it started."""
        try:
            return int(self.web_port_file.read_text())
        except (OSError, ValueError):
            return None

    def start(self, timeout: float = 120.0) -> None:
        """Start the master and the workers that are not running; wait until all serve."""
        java = find_java(self.settings.metastore.java_home)
        env = java_env(java)
        env["SPARK_LOG_DIR"] = str(self.run_dir)
        env["SPARK_LOCAL_IP"] = self.host  # the web UIs too, not every interface
        env["SPARK_DAEMON_MEMORY"] = "512m"
        # Spark's own launcher, which also tells the workers how to start executors.
        base = [str(spark_home() / "bin" / "spark-class")]
        if self.master_process.pid() is None:
            web_port = free_port(self.host, self.master_port() + 1000, [self.master_port()])
            self.run_dir.mkdir(parents=True, exist_ok=True)
            self.web_port_file.write_text(str(web_port))
            address = ["--host", self.host, "--port", str(self.master_port())]
            ui = ["--webui-port", str(web_port)]
            self.master_process.start([*base, MASTER_CLASS, *address, *ui], env=env)
        self.master_process.wait_until(lambda: self.status() is not None, timeout, "a Spark master")
        spark = self.settings.spark
        for index, worker in enumerate(self.worker_processes(), start=1):
            if worker.pid() is not None:
                continue
            work_dir = self.settings.data_dir / "spark" / f"worker-{index}"
            work_dir.mkdir(parents=True, exist_ok=True)
            resources = ["--cores", str(spark.worker_cores), "--memory", spark.worker_memory]
            place = ["--host", self.host, "--work-dir", str(work_dir), "--webui-port", "0"]
            worker.start([*base, WORKER_CLASS, *resources, *place, spark.master], env=env)
        deadline = time.monotonic() + timeout
        while True:
            status = self.status()
            if status is not None and status.alive_workers >= spark.workers:
                return
            for worker in self.worker_processes():
                if worker.pid() is None:
                    raise StackError(
                        f"{worker.name} exited while starting; last lines of "
                        f"{worker.log_file}:\n{worker.log_tail()}"
                    )
            if time.monotonic() > deadline:
                raise StackError(
                    f"the Spark master has {status.alive_workers if status else 0} of "
                    f"{spark.workers} workers after {timeout:.0f} s; see {self.run_dir}"
                )
            time.sleep(0.5)

    def status(self) -> ClusterStatus | None:
        """The master's view (from its web UI's JSON), or None if it does not answer."""
        port = self.web_port()
        if port is None:
            return None
        try:
            with urlopen(f"http://{self.host}:{port}/json/", timeout=2) as answer:
                state = json.load(answer)
        except (OSError, URLError, ValueError):
            return None
        return ClusterStatus(str(state.get("url", "")), int(state.get("aliveworkers", 0)))

    def stop(self) -> dict[str, bool]:
        """Stop the workers (also those of a larger ``spark.workers`` before), then the master."""
        workers = [
            ManagedProcess(p.stem, self.run_dir) for p in self.run_dir.glob("spark-worker-*.pid")
        ]
        stopped = {worker.name: worker.stop() for worker in workers}
        stopped[self.master_process.name] = self.master_process.stop()
        self.web_port_file.unlink(missing_ok=True)
        return stopped
