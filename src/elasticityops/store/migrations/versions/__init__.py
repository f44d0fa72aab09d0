"""One module per schema change, oldest first (Alembic skips this file)."""
