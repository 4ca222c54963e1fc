"""One settings model for the whole stack.

Layers, later ones win:

1. defaults (the embedded stack: Derby metastore, ``local[*]`` Spark, a
   ``file://`` lake inside the data dir);
2. the settings the running stack was started with (``<data dir>/stack.json``),
   so that any command finds the stack ``lakeward up`` started in that dir;
3. the stack file (``lakeward.toml``, or ``--config FILE`` / ``LAKEWARD_CONFIG``);
4. environment variables ``LAKEWARD_<SECTION>__<KEY>`` (for example
   ``LAKEWARD_SPARK__MASTER``), plus the short forms ``LAKEWARD_DATA_DIR`` and
   ``LAKEWARD_COVID_SOURCE``;
5. command-line flags.

Every value remembers where it came from, so that a bad one is reported with
its key and its file and line, or its variable, or its flag.
"""

from __future__ import annotations

from lakeward.config.loader import load_settings, resolve_data_dir
from lakeward.config.sections import (
    BUCKET_NAME,
    DATABASE_URL_SCHEMES,
    DATASET_NAME,
    DEFAULT_DATA_DIR,
    ENV_CONFIG,
    ENV_COVID_SOURCE,
    ENV_DATA_DIR,
    ENV_PREFIX,
    JHU_TIME_SERIES_URL,
    STACK_FILE_NAME,
    STATE_FILE_NAME,
    AccessSettings,
    ApiSettings,
    BiSettings,
    CovidSettings,
    DatabasesSettings,
    ErasureDataset,
    ErasureRelational,
    ErasureSettings,
    ErasureTable,
    LakeSettings,
    LogsSettings,
    MetastoreSettings,
    ServerSettings,
    Settings,
    SparkSettings,
    hide_password,
)

__all__ = [
    "AccessSettings",
    "ApiSettings",
    "BUCKET_NAME",
    "BiSettings",
    "CovidSettings",
    "DATABASE_URL_SCHEMES",
    "DATASET_NAME",
    "DEFAULT_DATA_DIR",
    "DatabasesSettings",
    "ENV_CONFIG",
    "ENV_COVID_SOURCE",
    "ENV_DATA_DIR",
    "ENV_PREFIX",
    "ErasureDataset",
    "ErasureRelational",
    "ErasureSettings",
    "ErasureTable",
    "JHU_TIME_SERIES_URL",
    "LakeSettings",
    "LogsSettings",
    "MetastoreSettings",
    "STACK_FILE_NAME",
    "STATE_FILE_NAME",
    "ServerSettings",
    "Settings",
    "SparkSettings",
    "hide_password",
    "load_settings",
    "resolve_data_dir",
]
