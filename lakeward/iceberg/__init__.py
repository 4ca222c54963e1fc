"""Iceberg tables in the metastore, kept the way Iceberg's own HiveCatalog keeps them.

A table is a metastore table with ``table_type=ICEBERG`` and ``metadata_location``; its
commits swap that location under a metastore lock, checking the previous one. pyiceberg's
HiveCatalog does exactly that, so lakeward, Spark with Iceberg's runtime, Trino and any
pyiceberg client on the same metastore read and write the same tables.

- ``catalog``: the pyiceberg catalog of a stack's metastore, and what a table is.
- ``schemas``: Hive's type names (what SQL declares) to Iceberg's types and back, and
  Athena's partition transforms (``day(ts)``, ``bucket(16, id)``).
- ``io``: the embedded lake's ``s3://`` names read as its files.
"""
