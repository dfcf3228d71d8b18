"""How the app's cookies are set: ``SameSite=Lax`` in a tab of their own, ``SameSite=None; Secure;
Partitioned`` inside an LMS's frame.

A launch from an LMS (``app.lti``) sets ``EMBEDDED`` (the platform's row id) in the LMS's partition; every
cookie set while it is there is then one a cross-site frame may send back. Partitioned (CHIPS): it lives only
under that LMS's site, so Ringlab in its own tab keeps its own, Lax, cookies.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.types import Scope

EMBEDDED = "ringlab_embedded"


def embedded_platform(scope: Scope) -> int | None:
    """The LMS platform whose frame this request comes from, if it has launched Ringlab there."""
    from app.web.auth import cookie_value

    value = cookie_value(scope, EMBEDDED)
    return int(value) if value and value.isdigit() else None


def options(request: Request, *, embedded: bool | None = None) -> dict[str, Any]:
    """``set_cookie`` keyword arguments for this request's context."""
    framed = embedded_platform(request.scope) is not None if embedded is None else embedded
    if framed:
        return {"httponly": True, "samesite": "none", "secure": True, "partitioned": True, "path": "/"}
    return {"httponly": True, "samesite": "lax", "secure": request.url.scheme == "https", "path": "/"}


def header_attributes(scope: Scope) -> str:
    """The attributes after ``name=value`` in a raw Set-Cookie header (ASGI middleware)."""
    if embedded_platform(scope) is not None:
        return "; Path=/; HttpOnly; SameSite=None; Secure; Partitioned"
    return "; Path=/; HttpOnly; SameSite=Lax" + ("; Secure" if scope.get("scheme") == "https" else "")


def delete(response: Any, request: Request, name: str) -> None:
    """Remove cookie ``name`` in this request's context (a partitioned cookie is removed in its partition)."""
    response.delete_cookie(name, **options(request))
