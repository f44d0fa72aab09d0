"""The dev cluster's own error tree: callers catch these, never subprocess errors.

What the API server answers comes through the backend's client (devcluster/client.py) as the
domain's errors instead (`elasticityops.domain.errors`: `Conflict`, `NotFound`,
`TemporaryError`, `PermanentError`), never as an HTTP library's exception."""

from __future__ import annotations


class DevClusterError(Exception):
    """Base class of every error the dev cluster raises on purpose."""


class BuildError(DevClusterError):
    """A Go build of the pinned binaries failed (the message carries the tail of its log)."""


class BinariesMissingError(DevClusterError):
    """The binaries are not built yet and building was not allowed."""


class StartupError(DevClusterError):
    """A component did not become ready in time (the message names it and its log file)."""
