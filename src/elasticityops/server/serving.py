"""uvicorn's server, telling the gateway as soon as its stop begins.

On SIGTERM or SIGINT uvicorn stops accepting, then waits up to its graceful timeout for the
open connections, cancels what is left (a bare 500 or a body cut off, a CancelledError in the
log) and only then runs the lifespan's end. A `?wait`, a log follow or an event stream would
hold the stop that long and then be cut off, and the dispatcher would go on starting queued
work meanwhile; so the stop begins (server/app.py `begin_stop`) before uvicorn waits."""

from __future__ import annotations

import socket

import uvicorn
from fastapi import FastAPI

from elasticityops.server.app import begin_stop


class GatewayServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, app: FastAPI) -> None:
        super().__init__(config)
        self._app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        begin_stop(self._app)
        await super().shutdown(sockets)
