"""The SQL engines a workgroup can run its queries on.

engine = load_engine("duckdb", settings)
result = engine.execute(execution_id, sql, tables, Limits(memory_limit="1GB"))
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lakeward.errors import ConfigError, QueryCancelled, QueryFailed
from lakeward.query.engines.base import (
    Engine,
    EngineResult,
    Limits,
    ResolvedTable,
    WriteResult,
    WriteTarget,
    WrittenFile,
)

if TYPE_CHECKING:
    from lakeward.config import Settings

__all__ = [
    "ENGINES",
    "Engine",
    "EngineResult",
    "Limits",
    "QueryCancelled",
    "QueryFailed",
    "ResolvedTable",
    "WriteResult",
    "WriteTarget",
    "WrittenFile",
    "load_engine",
]

ENGINES = ("duckdb", "spark")


def load_engine(name: str, settings: Settings) -> Engine:
    """The engine called ``name``, for the stack in ``settings``."""
    # Imported on demand: each engine pulls in a heavy library (DuckDB, PySpark).
    if name == "duckdb":
        from lakeward.query.engines.duckdb import DuckDbEngine

        return DuckDbEngine(settings)
    if name == "spark":
        from lakeward.query.engines.spark import SparkEngine

        return SparkEngine(settings)
    raise ConfigError(f"unknown query engine {name!r} (known: {', '.join(ENGINES)})")
