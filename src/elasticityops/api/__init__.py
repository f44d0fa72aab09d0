"""The HTTP API (FastAPI): routes, auth, error mapping in one place (errors.py)."""
