"""The dev cluster's own error tree: callers catch these, never subprocess or httpx errors."""

from __future__ import annotations


class DevClusterError(Exception):
    """Base class of every error the dev cluster raises on purpose."""


class BuildError(DevClusterError):
    """A Go build of the pinned binaries failed (the message carries the tail of its log)."""


class BinariesMissingError(DevClusterError):
    """The binaries are not built yet and building was not allowed."""


class StartupError(DevClusterError):
    """A component did not become ready in time (the message names it and its log file)."""


class KubeApiError(DevClusterError):
    """The API server answered with an error status; `status` is the HTTP code."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
