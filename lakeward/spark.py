"""The one place that builds SparkSessions, wired to the stack's metastore and lake."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from lakeward.config import Settings
from lakeward.errors import ConfigError, JavaError
from lakeward.jvm import find_java, iceberg_runtime_jar, java_env, s3a_jars
from lakeward.metastore.launcher import LAKE_FILE_SYSTEM, launcher_classes
from lakeward.metastore.uris import metastore_uris
from lakeward.storage.paths import catalog_uri, hadoop_conf, local_path, warehouse_uri

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

LOG_CONFIG = Path(__file__).parent / "resources" / "spark-log4j2.properties"


def under_spark_submit() -> bool:
    """True when this Python process is the driver of a ``spark-submit`` run.

    spark-submit starts the JVM first and hands Python its gateway; the master
    and the driver's memory are then spark-submit's to decide.
    """
    return "PYSPARK_GATEWAY_PORT" in os.environ


def spark_conf(settings: Settings, app_name: str, hive: bool = True) -> dict[str, str]:
    """The Spark settings of the stack; ``settings.spark.conf`` wins over them."""
    conf = {
        "spark.app.name": app_name,
        "spark.sql.warehouse.dir": catalog_uri(settings, warehouse_uri(settings)),
        # The lake is read and written by its s3:// names through Hadoop's s3a connector.
        # Iceberg's runtime, when installed, too: the SQL service's Spark workgroups read
        # Iceberg tables through a catalog of their own (``iceberg_read_catalog``).
        "spark.jars": ",".join(str(jar) for jar in [*s3a_jars(), *iceberg_runtime_jars()]),
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        "spark.ui.enabled": "false",
        # Jobs run side by side (the ETL's writes) share the cores instead of queuing.
        "spark.scheduler.mode": "FAIR",
        # Keep Derby's and Spark's scratch files in the data dir, not the cwd.
        "spark.driver.extraJavaOptions": (
            f"-Dderby.system.home={settings.data_dir / 'spark'} "
            f"-Dlog4j.configurationFile={LOG_CONFIG}"
        ),
        "spark.local.dir": str(settings.data_dir / "spark" / "tmp"),
    }
    if not under_spark_submit():
        conf["spark.master"] = settings.spark.master
        conf["spark.driver.memory"] = settings.spark.driver_memory
    if hive:
        conf["spark.sql.catalogImplementation"] = "hive"
        conf.update(metastore_conf(metastore_uris(settings)))
    conf.update({f"spark.hadoop.{key}": value for key, value in hadoop_conf(settings).items()})
    conf.update(direct_lake_conf(settings))
    conf.update(settings.spark.conf)
    return conf


def iceberg_conf() -> dict[str, str]:
    """Iceberg's runtime in a session: its SQL extensions (DELETE, UPDATE, MERGE, CALL) and
    the session catalog over the Hive metastore, which opens Iceberg tables as Iceberg and
    any other table as before. Add to ``spark_conf``'s; ``spark.jars`` gains the runtime."""
    return {
        "spark.sql.extensions": "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions",
        "spark.sql.catalog.spark_catalog": "org.apache.iceberg.spark.SparkSessionCatalog",
        "spark.sql.catalog.spark_catalog.type": "hive",
    }


def with_iceberg(conf: dict[str, str]) -> dict[str, str]:
    """``conf`` (a session's settings) with Iceberg's runtime on the classpath and in use."""
    jars = [j for j in conf.get("spark.jars", "").split(",") if j]
    runtime = str(iceberg_runtime_jar())
    jars += [] if runtime in jars else [runtime]
    return {**conf, **iceberg_conf(), "spark.jars": ",".join(jars)}


def iceberg_runtime_jars() -> list[Path]:
    """Iceberg's Spark runtime, or nothing when it is not installed."""
    try:
        return [iceberg_runtime_jar()]
    except JavaError:
        return []


def iceberg_read_catalog(settings: Settings, name: str) -> dict[str, str]:
    """A session's Iceberg catalog ``name`` over the stack's metastore, without Iceberg's SQL
    extensions or a replaced session catalog (runtime settings, so one session may add it
    to a SparkContext others share). Tables are loaded anew by each query: another engine
    may have committed since."""
    prefix = f"spark.sql.catalog.{name}"
    return {
        prefix: "org.apache.iceberg.spark.SparkCatalog",
        f"{prefix}.type": "hive",
        f"{prefix}.uri": ",".join(metastore_uris(settings)),
        f"{prefix}.cache-enabled": "false",
    }


def direct_lake_conf(settings: Settings) -> dict[str, str]:
    """With ``spark.lake_access = "direct"``: the embedded lake's s3:// names read and
    written straight from its directory (the metastore's LakeFileSystem), with no HTTP hop.
    Only a local master shares this machine's files; a cluster goes through the endpoint."""
    lake_dir = local_path(settings.lake_root)
    if settings.spark.lake_access != "direct" or lake_dir is None:
        return {}
    if not settings.spark.master.startswith("local"):
        raise ConfigError(
            f'spark.lake_access = "direct" needs a local master, not {settings.spark.master}: '
            "a cluster's executors reach the lake through the S3 endpoint"
        )
    java = find_java(settings.metastore.java_home)
    classes = launcher_classes(java, settings.data_dir / "metastore")
    return {
        "spark.driver.extraClassPath": str(classes),
        "spark.hadoop.fs.s3.impl": LAKE_FILE_SYSTEM,
        "spark.hadoop.fs.s3a.impl": LAKE_FILE_SYSTEM,
        "spark.hadoop.lakeward.lake.dir": str(lake_dir),
    }


def metastore_conf(uris: list[str]) -> dict[str, str]:
    """Hive's metastore client settings: every node, and failover in seconds, not minutes.

    Hive's client waits up to ``client.socket.timeout`` (600 s by default) for
    an answer; a node killed outright is noticed at once (its connection
    closes), so the timeout only bounds a node that hangs, and 60 s still
    leaves room for a slow DDL. On a lost connection Hive's retrying client
    reconnects to another node (chosen at random) after
    ``client.connect.retry.delay`` (whole seconds): none when another node can
    answer, 1 s when the only node may be restarting.
    """
    return {
        "spark.hadoop.hive.metastore.uris": ",".join(uris),
        "spark.hadoop.hive.metastore.client.socket.timeout": "60s",
        "spark.hadoop.hive.metastore.failure.retries": "3",
        "spark.hadoop.hive.metastore.connect.retries": "3",
        "spark.hadoop.hive.metastore.client.connect.retry.delay": "0s" if len(uris) > 1 else "1s",
    }


def build_session(settings: Settings, app_name: str, hive: bool = True) -> SparkSession:
    """A SparkSession on the stack's master, metastore and lake.

    Under spark-submit the session spark-submit started is reused, with the
    stack's settings applied on top.
    """
    if not under_spark_submit():
        # Spark's launcher scripts need JAVA_HOME to find the right Java.
        os.environ.update(
            {
                k: v
                for k, v in java_env(find_java(settings.metastore.java_home)).items()
                if k in ("JAVA_HOME", "SPARK_HOME")
            }
        )
        (settings.data_dir / "spark" / "tmp").mkdir(parents=True, exist_ok=True)
        if settings.spark.master.startswith("local") or settings.spark.workers:
            # A local driver, or one of the stack's own cluster, stays on this machine's
            # address; Python UDFs run in workers that import lakeward: this interpreter
            # has it.
            host = "127.0.0.1" if settings.spark.master.startswith("local") else None
            os.environ.setdefault("SPARK_LOCAL_IP", host or settings.spark.cluster_host)
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder
    for key, value in spark_conf(settings, app_name, hive).items():
        builder = builder.config(key, value)
    if hive:
        builder = builder.enableHiveSupport()
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    return session
