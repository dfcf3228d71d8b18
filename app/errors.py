"""Domain exceptions. Services raise them; one handler in app.web.errors maps them to HTTP."""

from __future__ import annotations


class DomainError(Exception):
    status_code = 400

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class NotFound(DomainError):
    status_code = 404
