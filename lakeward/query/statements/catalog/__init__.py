"""Catalog statements: DDL over a Hive catalog's metastore (see lakeward.query.statements).

CREATE/DROP DATABASE (databases.py); CREATE EXTERNAL TABLE, DROP TABLE, SHOW CREATE
TABLE, ALTER TABLE SET TBLPROPERTIES / ADD COLUMNS / REPLACE COLUMNS (tables.py);
ALTER TABLE ADD/DROP PARTITION, MSCK REPAIR TABLE, SHOW PARTITIONS (partitions.py).
Each module registers its parsers with ``@claims`` when imported.
"""

from lakeward.query.statements.catalog import databases, partitions, tables

__all__ = ["databases", "partitions", "tables"]
