"""Domain exceptions. Services raise them; one handler in app.web.errors maps them to HTTP."""

from __future__ import annotations


class DomainError(Exception):
    status_code = 422  # bad input, unless a subclass says otherwise

    def __init__(self, message: str, *, field: str | None = None):
        super().__init__(message)
        self.message = message
        self.field = field


class InvalidInput(DomainError):
    status_code = 422


class Unauthorized(DomainError):
    status_code = 401


class Forbidden(DomainError):
    status_code = 403


class NotFound(DomainError):
    status_code = 404


class Conflict(DomainError):
    status_code = 409


class RateLimited(DomainError):
    status_code = 429

    def __init__(self, message: str, *, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class SignInRequired(DomainError):
    """No valid session: pages redirect to the sign-in form, the API answers 401."""

    status_code = 401
