"""/docs: Swagger UI served by the gateway itself, from the assets the `swagger-ui-py` package
ships, so the page works on a machine with no internet (FastAPI's default loads it from a CDN).
ReDoc ships in no package: /redoc is not served."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_PATH = "/docs"
ASSETS_PATH = "/docs/assets"


def swagger_ui_assets() -> Path | None:
    """The folder of Swagger UI's dist files inside the installed `swagger-ui-py` package,
    found without importing it (its handlers pull in template engines the gateway never uses)."""
    found = importlib.util.find_spec("swagger_ui")
    if found is None or not found.submodule_search_locations:
        return None
    for root in found.submodule_search_locations:
        static = Path(root) / "static"
        if (static / "swagger-ui-bundle.js").is_file():
            return static
    return None


def install(app: FastAPI) -> bool:
    """Serve /docs and its assets from this process; False (and no /docs) when the package is
    missing, which only a broken install can make happen (it is a dependency)."""
    assets = swagger_ui_assets()
    if assets is None:
        return False
    app.mount(ASSETS_PATH, StaticFiles(directory=assets), name="swagger-ui-assets")

    async def swagger_ui(_request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json",
            title=f"{app.title} - API",
            swagger_js_url=f"{ASSETS_PATH}/swagger-ui-bundle.js",
            swagger_css_url=f"{ASSETS_PATH}/swagger-ui.css",
            swagger_favicon_url=f"{ASSETS_PATH}/favicon-32x32.png",
            # No badge fetched from validator.swagger.io: nothing on the page leaves the gateway.
            swagger_ui_parameters={"validatorUrl": None},
        )

    app.add_route(DOCS_PATH, swagger_ui, include_in_schema=False)
    return True
