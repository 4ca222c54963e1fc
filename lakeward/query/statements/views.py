"""views statements (see lakeward.query.statements)."""
