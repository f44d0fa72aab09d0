"""The FastAPI application: routers, auth on /v1, error mapping. The parts it serves (store,
dispatcher, backend) are built by server.py and put on `app.state.runtime` by its lifespan."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager

from fastapi import APIRouter, Depends, FastAPI

from elasticityops import __version__
from elasticityops.api import errors, functions_routes, health_routes, invocations_routes
from elasticityops.api.auth import require_api_token
from elasticityops.settings import Settings

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

DESCRIPTION = """Run GPU functions like Lambda: register a function, invoke it over HTTP, follow
its state, logs and result. Every /v1 route but the result callback needs
`Authorization: Bearer TOKEN` (`eops token create`). Errors are `{"error": {"code", "message",
"problems": [{"field", "problem", "fix"}]}}`."""


def create_app(settings: Settings, lifespan: Lifespan) -> FastAPI:
    app = FastAPI(
        title="ElasticityOps",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
    )
    errors.install(app)
    v1 = APIRouter(prefix="/v1", dependencies=[Depends(require_api_token)])
    v1.include_router(functions_routes.router)
    v1.include_router(invocations_routes.build_router(settings.api.max_wait_seconds))
    app.include_router(v1)
    app.include_router(invocations_routes.build_accept_router(settings.api.max_wait_seconds), prefix="/v1")
    app.include_router(invocations_routes.build_callback_router(), prefix="/v1")
    app.include_router(health_routes.router)
    return app
