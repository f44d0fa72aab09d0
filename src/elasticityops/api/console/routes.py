"""/ui: the console's pages and its login. The pages are static files of this package (no
CDN, no build step); /ui/login trades an API token for the session cookie (session.py)."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import orjson
from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from elasticityops.api.auth import bearer_token, hash_token
from elasticityops.api.body import parse_json, read_body
from elasticityops.api.console import session
from elasticityops.api.runtime import Runtime
from elasticityops.domain.errors import FieldProblem, InvalidInput, Unauthorized
from elasticityops.domain.tokens import ApiToken

STATIC = Path(__file__).with_name("static")
UI_PATH = "/ui"
ASSETS_PATH = "/ui/assets"
_LOGIN_LIMIT = 4096
# The page is the app's shell; its modules come from /ui/assets with validators (304 on reload).
_NO_CACHE = {"Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff", "X-Frame-Options": "DENY"}
_CSP = "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'"

router = APIRouter(include_in_schema=False)


def install_assets(app: FastAPI) -> None:
    app.mount(ASSETS_PATH, StaticFiles(directory=STATIC), name="console-assets")


@router.get(UI_PATH)
@router.get(UI_PATH + "/")
async def console_page() -> FileResponse:
    return FileResponse(
        STATIC / "index.html",
        media_type="text/html; charset=utf-8",
        headers={**_NO_CACHE, "Content-Security-Policy": _CSP},
    )


def _answer(rt: Runtime, token: ApiToken, cookie: str) -> dict[str, object]:
    return {
        "token": {"id": token.id, "name": token.name, "scope": token.scope.value},
        "csrf": session.csrf_value(session.session_key(rt.server_secret), cookie),
        "role": rt.role,
        # What runs a function: its command in its workdir (local) or its image (kubernetes).
        "backend": rt.settings.backend,
    }


@router.post(UI_PATH + "/login")
async def login(request: Request) -> Response:
    """Body `{"token": "eops_..."}` as application/json: a form of another site can post only
    form or plain-text bodies without a CORS preflight, so it cannot log a browser in to a
    session of its choosing."""
    rt: Runtime = request.app.state.runtime
    if request.headers.get("content-type", "").partition(";")[0].strip().lower() != "application/json":
        raise InvalidInput(
            [FieldProblem("header Content-Type", "is not application/json", "send the token as JSON")]
        )
    body = parse_json(await read_body(request, _LOGIN_LIMIT))
    raw = body.get("token") if isinstance(body, dict) else None
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidInput([FieldProblem("token", "is missing", "paste an API token (eops token create)")])
    token = bearer_token("Bearer " + raw.strip())
    found = None if token is None else await rt.tokens.check(token)
    if token is None or found is None:
        raise Unauthorized("that token is not valid here (unknown, revoked or expired)")
    now = rt.clock.now()
    expires = now + timedelta(hours=rt.settings.session.hours)
    if found.expires_at is not None:
        expires = min(expires, found.expires_at)
    cookie = session.make_cookie(session.session_key(rt.server_secret), hash_token(token), expires)
    response = Response(orjson.dumps(_answer(rt, found, cookie)), media_type="application/json")
    response.set_cookie(
        session.COOKIE,
        cookie,
        max_age=max(1, int((expires - now).total_seconds())),
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )
    return response


@router.get(UI_PATH + "/session")
async def current_session(request: Request) -> Response:
    """Who the cookie logs in as, and the CSRF value the page sends with what it changes."""
    rt: Runtime = request.app.state.runtime
    cookie = request.cookies.get(session.COOKIE, "")
    key = session.session_key(rt.server_secret)
    digest = session.read_cookie(key, cookie, rt.clock.now()) if cookie else None
    found = await rt.tokens.check_hash(digest) if digest else None
    if found is None:
        raise Unauthorized("not logged in (or the session's token was revoked): log in at /ui")
    return Response(orjson.dumps(_answer(rt, found, cookie)), media_type="application/json")


@router.post(UI_PATH + "/logout")
async def logout() -> Response:
    response = Response(status_code=204)
    response.delete_cookie(session.COOKIE, path="/", httponly=True, samesite="strict")
    return response
