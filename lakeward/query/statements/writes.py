"""writes statements (see lakeward.query.statements)."""
