"""The FastAPI application: routers, auth on /v1, error mapping. The parts it serves (store,
dispatcher, backend) are built by server/app.py and put on `app.state.runtime` by its lifespan."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.openapi.utils import get_openapi

from elasticityops import __version__
from elasticityops.api import (
    batch_routes,
    capacity_routes,
    cost_routes,
    docs,
    errors,
    events_routes,
    functions_routes,
    headroom_routes,
    health_routes,
    invocations_routes,
    openapi_links,
    tokens_routes,
    webhooks_routes,
)
from elasticityops.api.auth import require_api_token
from elasticityops.api.console import routes as console_routes
from elasticityops.api.runtime import GatewaySettings

Lifespan = Callable[[FastAPI], AbstractAsyncContextManager[None]]

DESCRIPTION = """Run GPU functions like Lambda: register a function, invoke it over HTTP, follow
its state, logs and result. Every /v1 route but the result callback needs
`Authorization: Bearer TOKEN` (`eops token create`): a token of scope `invoke` may invoke, read
and cancel; deploying and deleting functions and managing tokens need scope `admin`. Errors are
`{"error": {"code", "message", "problems": [{"field", "problem", "fix"}]}}`."""


def create_app(settings: GatewaySettings, lifespan: Lifespan) -> FastAPI:
    app = FastAPI(
        title="ElasticityOps",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        docs_url=None,  # served from this process's own files: docs.install
        redoc_url=None,  # ReDoc would load from a CDN
    )
    errors.install(app)
    docs.install(app)
    v1 = APIRouter(prefix="/v1", dependencies=[Depends(require_api_token)])
    v1.include_router(functions_routes.router)
    v1.include_router(tokens_routes.router)
    v1.include_router(headroom_routes.router)
    v1.include_router(cost_routes.router)
    v1.include_router(capacity_routes.router)
    v1.include_router(events_routes.router)
    v1.include_router(webhooks_routes.router)
    v1.include_router(invocations_routes.build_router(settings.api.max_wait_seconds))
    v1.include_router(batch_routes.build_router())
    app.include_router(v1)
    app.include_router(invocations_routes.build_callback_router(), prefix="/v1")
    app.include_router(health_routes.router)
    app.include_router(console_routes.router)
    console_routes.install_assets(app)
    # The accept route first: routes are matched in order, and it is the one under load.
    app.router.routes.insert(0, invocations_routes.accept_route(settings.api.max_wait_seconds))
    _document_accept_route(app, settings.api.max_wait_seconds)
    return app


def _document_accept_route(app: FastAPI, max_wait: int) -> None:
    """FastAPI documents only its own routes; add the plain accept route's operation, then the
    links between operations (openapi_links)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            path = schema["paths"].setdefault(invocations_routes.ACCEPT_PATH, {})
            path["post"] = invocations_routes.accept_operation(max_wait)
            app.openapi_schema = openapi_links.add_links(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
