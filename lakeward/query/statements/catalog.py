"""catalog statements (see lakeward.query.statements)."""
