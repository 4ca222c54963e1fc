"""lakeward: a self-hosted data lake with a real Hive Metastore, Spark ETL and Athena-style SQL."""

__version__ = "0.1.0"

__all__ = ["__version__"]
