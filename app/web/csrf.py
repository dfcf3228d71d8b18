"""CSRF protection and a request body limit, as one pure ASGI middleware.

Every visitor gets a random token in an HttpOnly cookie; pages put the same
token in forms (hidden ``csrf_token`` field) and in htmx requests (the
``X-CSRF-Token`` header set on <body>). A state-changing request whose token
does not match the cookie is refused with 403 before any route runs. The JSON
API under /api is exempt: it authenticates with bearer tokens only, which a
browser never attaches on its own.

The body is read here (at most ``max_body`` bytes, else 413) and replayed to
the app, so the form can be checked without consuming it.
"""

from __future__ import annotations

import secrets
from typing import Any

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.web import cookies
from app.web.auth import cookie_value

COOKIE = "ringlab_csrf"
FIELD = "csrf_token"
HEADER = "x-csrf-token"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}


class BodyTooLarge(Exception):
    pass


class CSRFMiddleware:
    def __init__(self, app: ASGIApp, *, max_body: int, exempt_prefixes: tuple[str, ...] = ("/api/",)):
        self.app = app
        self.max_body = max_body
        self.exempt_prefixes = exempt_prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        exempt = scope["path"].startswith(self.exempt_prefixes)
        existing = None if exempt else cookie_value(scope, COOKIE)
        token = existing if existing and len(existing) >= 32 else secrets.token_urlsafe(32)
        scope.setdefault("state", {})["csrf_token"] = token

        declared = headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.max_body:
            await _refuse(scope, receive, send, 413, "The request is too large.")
            return
        try:
            body = await _read_body(receive, self.max_body)
        except BodyTooLarge:
            await _refuse(scope, receive, send, 413, "The request is too large.")
            return

        if scope["method"] not in SAFE_METHODS and not exempt:
            sent = headers.get(HEADER) or await _form_token(scope, body)
            if not existing or not sent or not secrets.compare_digest(sent, existing):
                await _refuse(scope, receive, send, 403, "Missing or wrong CSRF token. Reload the page and try again.")
                return

        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        if exempt:  # bearer-token clients keep no cookie: none is set
            await self.app(scope, replay, send)
            return

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start" and existing != token:
                value = f"{COOKIE}={token}{cookies.header_attributes(scope)}"
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", value.encode())]}
            await send(message)

        await self.app(scope, replay, send_with_cookie)


async def _read_body(receive: Receive, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise BodyTooLarge
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _form_token(scope: Scope, body: bytes) -> str | None:
    content_type = dict(scope["headers"]).get(b"content-type", b"").decode("latin-1")
    if not content_type.startswith(("application/x-www-form-urlencoded", "multipart/form-data")):
        return None

    async def once() -> Message:
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        form: FormData = await Request(scope, once).form()
    except Exception:  # a malformed body has no token; the route would reject it anyway
        return None
    value: Any = form.get(FIELD)
    return value if isinstance(value, str) else None


async def _refuse(scope: Scope, receive: Receive, send: Send, status: int, text: str) -> None:
    # Imported here: the error page needs the templates, which need nothing from this module.
    from app.web.errors import error_response

    response = error_response(Request(scope, receive), status, text)
    await response(scope, receive, send)
