"""How the app's cookies are set: ``SameSite=Lax`` in a tab of their own, ``SameSite=None; Secure;
Partitioned`` inside an LMS's frame.

A launch from an LMS (``app.lti``) sets ``EMBEDDED`` (the platform's row id) in the LMS's partition; every
cookie set while it is there is then one a cross-site frame may send back. Partitioned (CHIPS): it lives only
under that LMS's site, so Ringlab in its own tab keeps its own, Lax, cookies.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Scope

EMBEDDED = "ringlab_embedded"


def embedded_platform(scope: Scope) -> int | None:
    """The LMS platform whose frame this request comes from, if it has launched Ringlab there."""
    from app.web.auth import cookie_value

    value = cookie_value(scope, EMBEDDED)
    return int(value) if value and value.isdigit() else None


def framed(request: Request) -> bool:
    return embedded_platform(request.scope) is not None


def _attributes(*, framed: bool, https: bool) -> str:
    if framed:
        return "; Path=/; HttpOnly; SameSite=None; Secure; Partitioned"
    return "; Path=/; HttpOnly; SameSite=lax" + ("; Secure" if https else "")


def header_attributes(scope: Scope) -> str:
    """The attributes after ``name=value`` in a raw Set-Cookie header (ASGI middleware)."""
    return _attributes(framed=embedded_platform(scope) is not None, https=scope.get("scheme") == "https")


def set_cookie(
    response: Response, request: Request, name: str, value: str, *, max_age: int | None = None,
    embedded: bool | None = None,
) -> None:  # fmt: skip
    """Set a cookie for this request's context (written by hand: Starlette's ``partitioned`` needs Python 3.14)."""
    inside = framed(request) if embedded is None else embedded
    age = "" if max_age is None else f"; Max-Age={max_age}"
    expired = "; Expires=Thu, 01 Jan 1970 00:00:00 GMT" if max_age == 0 else ""
    header = f"{name}={value}{age}{expired}{_attributes(framed=inside, https=request.url.scheme == 'https')}"
    response.headers.append("set-cookie", header)


def delete(response: Response, request: Request, name: str) -> None:
    """Remove cookie ``name`` in this request's context (a partitioned cookie is removed in its partition)."""
    set_cookie(response, request, name, '""', max_age=0)
