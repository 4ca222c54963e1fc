"""The SQL front of the query service, below the statements that use it.

- ``tokens``: one statement's tokens and ``Cursor``, the strict reader every statement
  beyond a query is parsed with (the leaf: it imports only sqlglot);
- ``names``: how names resolve (default catalog and database, registered catalogs);
- ``queries``: a query parsed, checked and its tables listed (``Statement``).

Which statement a text is, and the commands that run the others, are
``lakeward.query.statements``'. Nothing here loads an engine, so the BI layer and the
policy checks parse SQL without DuckDB, SQLAlchemy or pyarrow's Parquet.
"""
