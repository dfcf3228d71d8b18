"""Map domain exceptions and HTTP errors to friendly pages, or JSON under /api.

A database that cannot serve for a moment (restarting, unreachable: ``app.db.unavailable``) is a
503 with ``Retry-After``, never a 500, whether a route or a middleware (the session cookie's
lookup) met it: the handler covers routes, ``DatabaseGuard`` the middleware around them.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, Response
from sqlalchemy.exc import DataError, DBAPIError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.db import WriterBusy, reason, unavailable
from app.errors import DomainError, RateLimited, SignInRequired, Unauthorized
from app.web.security import HEADERS as SECURITY_HEADERS
from app.web.templating import render

log = logging.getLogger(__name__)
TITLES = {400: "Bad request", 401: "Sign in needed", 403: "Not allowed", 404: "Not found", 405: "Not allowed",
          409: "Conflict", 413: "Too large", 422: "Invalid input", 429: "Too many requests",
          500: "Something went wrong", 503: "Back in a moment"}  # fmt: skip
RETRY_AFTER_S = 5  # a PostgreSQL restart takes a few seconds; the engine reconnects on the next request
UNAVAILABLE = (
    "The database cannot be reached just now (it may be restarting). Try again in a few seconds; "
    "if you were saving something, check afterwards that it was saved."
)


def wants_json(request: Request) -> bool:
    return request.url.path.startswith("/api/")


def error_response(request: Request, status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    if wants_json(request):
        return JSONResponse({"detail": message}, status_code=status, headers=headers)
    context = {"status": status, "title": TITLES.get(status, "Error"), "message": message}
    response = render(request, "errors/error.html", context, status_code=status)
    if headers:
        response.headers.update(headers)
    return response


def _sign_in_redirect(request: Request, exc: SignInRequired) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    expired = "&expired=1" if "expired" in exc.message else ""
    location = f"/signin?next={quote(target)}{expired}"
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": location})
    return RedirectResponse(location, status_code=303)


def unavailable_response(request: Request, exc: BaseException) -> Response:
    """503 with Retry-After: the database will be back; the client should try again, not give up."""
    log.warning("database unavailable on %s %s: %s", request.method, request.url.path, reason(exc))
    headers = {"Retry-After": str(RETRY_AFTER_S)}
    if request.headers.get("hx-request"):
        # htmx leaves the page as it is on a 5xx; the page's live region says why nothing changed.
        headers["HX-Trigger"] = json.dumps({"ringlab:announce": UNAVAILABLE})
    return error_response(request, 503, UNAVAILABLE, headers)


class DatabaseGuard:
    """Middleware: a database error that means "unavailable" (see ``app.db.unavailable``) raised by
    the middleware inside it becomes a 503 with Retry-After; anything else passes on unchanged.

    Routes' errors are answered by the exception handler ``install`` registers; what this catches is
    raised before the routes, where no handler but the last-resort 500 would see it.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            if started or not unavailable(exc):
                raise
            await unavailable_response(Request(scope, receive), exc)(scope, receive, send)


def install(app: FastAPI) -> None:
    @app.exception_handler(DomainError)
    async def domain_error(request: Request, exc: DomainError) -> Response:
        if isinstance(exc, SignInRequired) and not wants_json(request):
            return _sign_in_redirect(request, exc)
        headers = {}
        if isinstance(exc, RateLimited):
            headers["Retry-After"] = str(exc.retry_after)
        if isinstance(exc, Unauthorized | SignInRequired):
            headers["WWW-Authenticate"] = "Bearer"
        if exc.status_code == 422 and wants_json(request):
            # Every 422 of the API has one shape, whether the schema or a service found the problem.
            where = ["body", exc.field] if exc.field else []
            errors = [{"loc": where, "msg": exc.message, "type": "invalid"}]
            return JSONResponse({"detail": exc.message, "errors": errors}, status_code=422, headers=headers)
        return error_response(request, exc.status_code, exc.message, headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> Response:
        message = exc.detail if isinstance(exc.detail, str) else TITLES.get(exc.status_code, "Error")
        if exc.status_code == 404 and message == "Not Found":
            message = "There is no page at this address."
        return error_response(request, exc.status_code, message, getattr(exc, "headers", None))

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> Response:
        errors = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        reasons = "; ".join(f"{'.'.join(str(p) for p in e['loc'][1:])}: {e['msg']}" for e in errors)
        if wants_json(request):
            return JSONResponse({"detail": f"Invalid request: {reasons}", "errors": errors}, status_code=422)
        return error_response(request, 422, reasons or "Invalid request.")

    @app.exception_handler(DataError)
    async def data_error(request: Request, exc: DataError) -> Response:
        # The database refused a value the request carried (PostgreSQL: a NUL character in text, a
        # number out of a column's range): the input was wrong, and nothing was written.
        nul = "NUL" in str(exc.orig)
        message = (
            "Text may not contain NUL (\\0) characters." if nul else "A value is out of the range this field takes."
        )
        if wants_json(request):
            errors = [{"loc": [], "msg": message, "type": "invalid"}]
            return JSONResponse({"detail": message, "errors": errors}, status_code=422)
        return error_response(request, 422, message)

    @app.exception_handler(DBAPIError)
    @app.exception_handler(PoolTimeout)
    @app.exception_handler(WriterBusy)
    async def database_error(request: Request, exc: Exception) -> Response:
        if not unavailable(exc):
            raise exc  # a statement the database refused: a bug, the 500 below logs it
        return unavailable_response(request, exc)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> Response:
        if unavailable(exc):  # met outside DatabaseGuard: still the database's moment, not a bug
            response = unavailable_response(request, exc)
        else:
            # Log the traceback for us; the browser only ever sees a plain apology.
            log.exception("unhandled error on %s %s", request.method, request.url.path)
            response = error_response(request, 500, "Something went wrong on our side. It has been logged.")
        # This response is sent from outside the middleware stack, so it gets the headers here.
        for key, value in SECURITY_HEADERS:
            response.headers.setdefault(key.decode(), value.decode())
        return response
