"""The OpenAPI document of the JSON API (`/openapi.json`), as the API answers.

FastAPI's generated document is corrected in three ways: it lists only the JSON API (the
HTML pages are not an API and answer with pages); every 422 is the shape
``app.web.errors`` sends, ``{"detail": "<string>", "errors": [...]}``; and each operation
lists the error statuses it can answer, each ``{"detail": "<string>"}``. A schemathesis test
(``tests/web/test_openapi.py``) calls every operation with generated input and fails on any
answer the document does not describe.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute

API_PREFIX = "/api/"
ERROR_REF = {"$ref": "#/components/schemas/Error"}
ERROR = {
    "title": "Error",
    "type": "object",
    "properties": {"detail": {"type": "string", "description": "what was wrong, for a person"}},
    "required": ["detail"],
}
VALIDATION_ERROR = {
    "title": "HTTPValidationError",
    "type": "object",
    "properties": {
        "detail": {"type": "string", "description": "every problem in one sentence"},
        "errors": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "loc": {"type": "array", "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
                    "msg": {"type": "string"},
                    "type": {"type": "string"},
                },
                "required": ["loc", "msg", "type"],
            },
        },
    },
    "required": ["detail", "errors"],
}
RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}
WWW_AUTHENTICATE = {"WWW-Authenticate": {"schema": {"type": "string"}}}
DESCRIPTIONS = {
    401: "No valid bearer token (or, for a token, a wrong password)",
    403: "Not allowed",
    404: "No such item, or not yours",
    409: "Conflicts with the current state: refresh and try again",
    413: "The request body is too large",
    429: "Too many requests: wait Retry-After seconds",
}
# The statuses an operation answers beyond 401 (operations that need a token), 404 (operations
# with path parameters), 413 (operations with a body) and 422 (operations with input).
EXTRA: dict[tuple[str, str], tuple[int, ...]] = {
    ("post", "/api/v1/auth/register"): (403, 409, 429),
    ("post", "/api/v1/auth/token"): (401, 429),
    ("put", "/api/v1/attempts/{attempt_id}/answers/{question_id}"): (409,),
    ("post", "/api/v1/reviews"): (404, 409),
    ("post", "/api/v1/reviews/undo"): (409,),
    ("post", "/api/v1/quizzes/{quiz_id}/attempts"): (403, 409),  # not in the course; no attempts left, closed
    ("post", "/api/v1/labs/{lab_id}/submissions"): (403, 409, 429),
    ("get", "/api/v1/instructor/gradebook"): (403,),
    ("get", "/api/v1/instructor/students/{user_id}/accommodation"): (403,),
    ("put", "/api/v1/instructor/students/{user_id}/accommodation"): (403,),
    ("delete", "/api/v1/instructor/students/{user_id}/accommodation"): (403,),
    ("get", "/api/v1/instructor/students/{user_id}/extensions"): (403,),
    ("post", "/api/v1/instructor/students/{user_id}/extensions"): (403,),
}
# Operations that answer another success status too: starting a quiz resumes the open attempt.
ALSO_OK: dict[tuple[str, str], tuple[str, str]] = {
    ("post", "/api/v1/quizzes/{quiz_id}/attempts"): ("201", "200"),
}


def _error(status: int) -> dict[str, Any]:
    response: dict[str, Any] = {
        "description": DESCRIPTIONS[status],
        "content": {"application/json": {"schema": ERROR_REF}},
    }
    if status == 429:
        response["headers"] = RETRY_AFTER
    if status == 401:
        response["headers"] = WWW_AUTHENTICATE
    return response


def build(app: FastAPI) -> dict[str, Any]:
    """The document: only the routes under /api/, with their real error answers."""
    routes = [r for r in app.routes if isinstance(r, APIRoute) and r.path.startswith(API_PREFIX)]
    schema = get_openapi(title=app.title, version=app.version, routes=routes)
    schemas = schema.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("ValidationError", None)
    schemas["HTTPValidationError"] = VALIDATION_ERROR
    schemas["Error"] = ERROR
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            responses = operation["responses"]
            statuses = set(EXTRA.get((method, path), ()))
            if operation.get("security"):
                statuses.add(401)
            if "{" in path:
                statuses.add(404)
            if "requestBody" in operation:
                statuses.add(413)
            for status in sorted(statuses):
                responses.setdefault(str(status), _error(status))
            if "422" in responses:
                responses["422"]["description"] = "Invalid input"
            if (method, path) in ALSO_OK:
                known, other = ALSO_OK[(method, path)]
                responses[other] = {**responses[known], "description": "Resumed the attempt already open"}
    return schema


def install(app: FastAPI) -> None:
    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = build(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
