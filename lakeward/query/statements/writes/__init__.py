"""Writes: CREATE TABLE ... AS SELECT, INSERT INTO ... SELECT|VALUES, and UNLOAD.

Each runs its SELECT on the workgroup's engine as a query would (``Planner.plan``:
tables resolved, reading authorized, SQL translated), the engine writes the rows into a
staging directory (``Engine.write``), and ``journal.Write`` publishes the files through
the lake's storage (checksums, object events) under the table's lock, then registers
the metadata last: the table for a CTAS, the new partitions (one ``add_partitions``) for
an INSERT. Anything refused is refused before a file is published; a failure or a stop
rolls back what was published and registered; a process that dies mid-write is rolled
back by the next one that notices (``Journal.roll_back_orphans``).

Athena's rules: a CTAS's ``external_location`` must be an empty place in the lake
(without one, the table goes to ``<workgroup result location>/tables/<query id>``); the
partition columns are the SELECT's last, in ``partitioned_by``'s order; the table's
Hive types follow from the SELECT's result types. The result is Trino's: one row of one
``rows`` column (the rows written), and ``UpdateCount`` in GetQueryResults.

``parsing.py`` reads the statements, ``options.py`` holds how a write lays its files out,
and ``commands.py`` runs them, each inside ``Journal.write``.
"""
