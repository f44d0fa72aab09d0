"""The store's schema as Alembic migrations: env.py, and versions/ with one file per change.

The store runs them at start-up (store/migrate.py); docs/migrations.md says how to add one."""
