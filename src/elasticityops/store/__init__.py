"""Durable state: SQLAlchemy tables and the SqlStore (store/sql.py; SQLite by default, PostgreSQL
by URL). Nothing is imported here, so the settings (store/settings.py) load without the database
libraries: the CLI reads them before it knows whether it opens a store at all."""
