"""The client's side of the JSON API over urllib: JSON in and out, and errors a person can act on."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import urllib.error

TIMEOUT_S = 30.0
USER_AGENT = "ringlab-client/0.1"


class ClientError(Exception):
    """An expected failure: the command prints the message (no traceback) and exits 2."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class TokenRefused(ClientError):
    def __init__(self) -> None:
        super().__init__("the server refused the token; run ringlab login")


class Api:
    """A Ringlab server at ``server`` (base URL), as the holder of ``token`` if one is given."""

    def __init__(self, server: str, token: str | None = None, *, timeout: float = TIMEOUT_S) -> None:
        self.server = server.rstrip("/")
        self.token = token
        self.timeout = timeout

    def get(self, path: str) -> Any:
        return json.loads(self._call("GET", path, None))

    def post(self, path: str, body: dict[str, Any], *, auth: bool = True) -> Any:
        return json.loads(self._call("POST", path, body, auth=auth))

    def text(self, path: str) -> str:
        return self._call("GET", path, None).decode("utf-8")

    def _call(self, method: str, path: str, body: dict[str, Any] | None, *, auth: bool = True) -> bytes:
        url = self.server + path
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        import urllib.error  # here, not at the top: every `ringlab` command imports this module
        import urllib.request

        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                return response.read()  # type: ignore[no-any-return]
        except urllib.error.HTTPError as exc:
            raise _refusal(exc, url, auth=auth and bool(self.token)) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ClientError(
                f"could not reach {url}: {reason}. Is the server address right, and is the server up?"
            ) from None


def detail(raw: bytes) -> str:
    """The server's own reason from an error body ({"detail": ...}), or '' if it gave none."""
    try:
        body = json.loads(raw)
    except ValueError:
        return ""
    found = body.get("detail") if isinstance(body, dict) else None
    return found if isinstance(found, str) else ""


def _refusal(exc: urllib.error.HTTPError, url: str, *, auth: bool) -> ClientError:
    reason = detail(exc.read())
    if exc.code == 401 and auth:
        return TokenRefused()
    if exc.code == 401:
        return ClientError(f"sign-in refused: {reason or 'wrong username or password'}")
    if exc.code == 429:
        wait = exc.headers.get("Retry-After")
        later = f" Try again in {wait} s." if wait else ""
        return ClientError(f"{reason or 'too many requests'}{later}")
    if exc.code == 404 and not reason:
        return ClientError(f"{url} was not found (404): is this a Ringlab server?")
    return ClientError(f"{url} answered {exc.code}: {reason or exc.reason}")
