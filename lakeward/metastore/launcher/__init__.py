"""The metastore node's launcher: Hive's Thrift service bound to one address.

``BoundMetastore.java`` (beside this file), the change listener the nodes
load (``ChangeLog.java``, see ``CHANGE_LISTENER``) and the file system of the
embedded lake's ``s3://`` names (``LakeFileSystem.java``) are compiled with ``javac`` against
the jars in the pyspark wheel, once per stack, into the stack's data dir.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import tempfile
from pathlib import Path

from lakeward.errors import JavaError
from lakeward.jvm import spark_jars

LAUNCHER_CLASS = "BoundMetastore"
CHANGE_LISTENER = "ChangeLog"
LAKE_FILE_SYSTEM = "LakeFileSystem"
LOCK_TABLES = "LockTables"  # the tables Iceberg's commits lock in, made if missing
DEAD_LOCKS = "DeadLocks"  # releases the locks of writers that died in a commit
OLD_CHANGES = "OldChanges"  # prunes the change log past metastore.change_log_retention
SOURCES = [
    Path(__file__).with_name(f"{name}.java")
    for name in (
        LAUNCHER_CLASS,
        CHANGE_LISTENER,
        LAKE_FILE_SYSTEM,
        LOCK_TABLES,
        DEAD_LOCKS,
        OLD_CHANGES,
    )
]
JDK_HINT = (
    "install a JDK with: sudo apt-get install -y openjdk-17-jdk-headless (./dev.sh install does)"
)


def find_javac(java: Path) -> Path:
    """The ``javac`` of the same Java installation as ``java``."""
    javac = java.resolve().parent / "javac"
    if not javac.is_file():
        raise JavaError(
            f"the metastore's launcher is compiled with javac, and {java} has none beside it; "
            + JDK_HINT
        )
    return javac


def launcher_classes(java: Path, work_dir: Path) -> Path:
    """A directory holding the compiled launcher, built if missing or out of date."""
    digest = hashlib.sha256(b"".join(s.read_bytes() for s in SOURCES)).hexdigest()[:16]
    target = work_dir / f"launcher-{digest}"
    if (target / f"{LAUNCHER_CLASS}.class").is_file():
        return target
    javac = find_javac(java)
    work_dir.mkdir(parents=True, exist_ok=True)
    # Compile beside the target and rename: a node never sees half a build.
    build = Path(tempfile.mkdtemp(prefix="launcher-build-", dir=work_dir))
    try:
        result = subprocess.run(
            [
                str(javac),
                "-nowarn",
                "-d",
                str(build),
                "-cp",
                str(spark_jars() / "*"),
                *map(str, SOURCES),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise JavaError(
                f"compiling the metastore launcher with {javac} failed:\n    "
                + "\n    ".join(result.stderr.strip().splitlines()[-8:])
            )
        try:
            build.rename(target)
        except OSError:  # another process finished first; its build is as good
            if not (target / f"{LAUNCHER_CLASS}.class").is_file():
                raise
    finally:
        shutil.rmtree(build, ignore_errors=True)
    return target
