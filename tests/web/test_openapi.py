"""The OpenAPI document describes the API as it answers: schemathesis calls every operation.

Generated requests (bounded: a few dozen per operation), with a student's bearer token and
with none. Any 5xx, or a status, content type, header or body the document does not
describe for that operation, fails the test.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy.orm import Session

from app.accounts.service import issue_api_token
from app.db import utcnow
from tests.conftest import backend_of
from tests.factories import make_user

# Per operation: bounded, so the suite stays quick. The API answers alike on both databases; PostgreSQL's
# run is there for what only it could make a 5xx of, and needs fewer.
EXAMPLES = {"sqlite": 20, "postgresql": 8}
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]


@pytest.fixture
def student_token(session: Session) -> dict[str, str]:
    user = make_user(session, "schema-student")
    issued = issue_api_token(user, session=session, now=utcnow(), ttl=timedelta(hours=1))
    session.commit()
    return {"Authorization": f"Bearer {issued.token}"}


HOLD_S = 0.5  # a generated ?wait= held at most this long (holds: tests/labs_app/test_waiting.py)


def short_hold(case: schemathesis.Case) -> None:
    """A generated long poll (``?wait=`` up to 30 s; a refused one answers only when its hold ends) is kept
    short, so that the calls stay quick: what is checked here is the answer, not the hold."""
    wait = (case.query or {}).get("wait")
    if isinstance(wait, int | float) and not isinstance(wait, bool) and wait > HOLD_S:
        case.query["wait"] = HOLD_S  # type: ignore[index]


def check_every_operation(app: FastAPI, headers: dict[str, str], db_url: str) -> None:
    """Generated calls of every operation; each operation's first failure is reported, then all of them."""
    examples = EXAMPLES[backend_of(db_url)]
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures = []
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 18
    for operation in operations:

        @given(case=operation.as_strategy())
        @settings(max_examples=examples, deadline=None, database=None, suppress_health_check=list(HealthCheck))
        def call(case: schemathesis.Case) -> None:
            short_hold(case)
            case.call_and_validate(headers=headers, checks=CHECKS)

        try:
            call()
        except Exception as exc:  # a failure group of schemathesis, or a hypothesis error
            failures.append(f"{operation.label}: {exc}")
    assert not failures, "\n\n".join(failures)


def test_the_api_answers_a_student_as_documented(app: FastAPI, student_token: dict[str, str], db_url: str) -> None:
    check_every_operation(app, student_token, db_url)


def test_the_api_answers_without_a_token_as_documented(app: FastAPI, db_url: str) -> None:
    check_every_operation(app, {}, db_url)


def test_the_document_lists_the_api_and_its_errors(app: FastAPI) -> None:
    spec = app.openapi()
    assert all(path.startswith("/api/v1/") for path in spec["paths"])
    submit = spec["paths"]["/api/v1/labs/{lab_id}/submissions"]["post"]["responses"]
    assert {"202", "401", "404", "409", "413", "422", "429"} <= set(submit)
    invalid = spec["components"]["schemas"]["HTTPValidationError"]
    assert invalid["properties"]["detail"]["type"] == "string" and "errors" in invalid["required"]
