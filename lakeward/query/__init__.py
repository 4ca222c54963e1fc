"""The Athena-style SQL service: catalogs over the metastore, engines, query executions."""
