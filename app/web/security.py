"""Security headers on every response (pure ASGI: no per-request task overhead)."""

from __future__ import annotations

import anyio.to_thread
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.lti import frames
from app.web.cookies import embedded_platform

# Only the app's own scripts and styles; MathML needs no script at all.
BASE_CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; "
    "connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'"
)
CSP = BASE_CSP + "; frame-ancestors 'none'"
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


def csp(frame_ancestors: str = "'none'", form_action: str = "'self'") -> str:
    """The policy with other frame ancestors (an LMS's frame) or form targets (a deep-linking answer)."""
    return BASE_CSP.replace("form-action 'self'", f"form-action {form_action}") + f"; frame-ancestors {frame_ancestors}"


async def _framing(scope: Scope) -> list[tuple[bytes, bytes]] | None:
    """In a browser an LMS launched Ringlab in: that LMS may frame the page (and no opener policy breaks it)."""
    platform_id = embedded_platform(scope)
    if platform_id is None:
        return None
    state = scope["app"].state
    if not hasattr(state, "lti_frames"):
        state.lti_frames = {}
    origins = frames.cached(state.lti_frames, platform_id)
    if origins is None:
        try:
            origins = await anyio.to_thread.run_sync(frames.load, state.lti_frames, platform_id, state.readers)
        except Exception:  # the database is away: not frameable this time (its outage is answered inside)
            return None
    policy = csp(" ".join(["'self'", *origins.split()]))
    return [(b"content-security-policy", policy.encode())]


class SecurityHeaders:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        framing = await _framing(scope) if not scope["path"].startswith("/static/") else None

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                if framing is not None and b"content-security-policy" not in present:
                    present.update({b"content-security-policy", b"cross-origin-opener-policy"})
                    message = {**message, "headers": [*message.get("headers", []), *framing]}
                if b"content-security-policy" in present:  # the response's own policy says who may frame it
                    present.add(b"x-frame-options")
                extra = [(k, v) for k, v in HEADERS if k not in present]
                if scope.get("scheme") == "https":
                    extra.append((b"strict-transport-security", b"max-age=31536000"))
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)
