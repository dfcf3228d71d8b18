"""Rate limits: the pure window, counting in the database, and whose address counts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.accounts.models import LimitHit
from app.accounts.ratelimit import Limit, release, retry_after, take
from app.config import Settings
from app.errors import RateLimited
from app.main import create_app
from tests.factories import make_user

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def test_window_allows_limit_then_says_how_long_to_wait() -> None:
    limit = Limit("b", events=3, window_s=60)
    hits = [T0, T0 + timedelta(seconds=1), T0 + timedelta(seconds=2)]
    assert retry_after(hits[:2], limit, T0 + timedelta(seconds=3)) is None
    assert retry_after(hits, limit, T0 + timedelta(seconds=3)) == 57  # the first leaves at T0+60
    assert retry_after(hits, limit, T0 + timedelta(seconds=60.5)) is None  # it has left


def test_take_counts_in_the_database_and_release_uncounts(session: Session) -> None:
    limit = Limit("test", events=2, window_s=300)
    first = take(limit, "10.0.0.1", "tries", session=session, now=T0)
    take(limit, "10.0.0.1", "tries", session=session, now=T0 + timedelta(seconds=10))
    with pytest.raises(RateLimited) as refused:
        take(limit, "10.0.0.1", "tries", session=session, now=T0 + timedelta(seconds=20))
    assert refused.value.retry_after == 280 and "Too many tries" in refused.value.message
    take(limit, "10.0.0.2", "tries", session=session, now=T0 + timedelta(seconds=20))  # another key
    release(first, session=session)
    take(limit, "10.0.0.1", "tries", session=session, now=T0 + timedelta(seconds=30))
    keys = set(session.scalars(select(LimitHit.key)))
    assert "10.0.0.1" not in keys and all(len(k) == 32 for k in keys)  # digests, not addresses
    # Events older than the longest window are deleted as new ones come.
    take(limit, "10.0.0.3", "tries", session=session, now=T0 + timedelta(hours=2))
    assert session.scalar(select(func.count()).select_from(LimitHit)) == 1


def test_forwarded_for_is_ignored_unless_the_proxy_is_trusted(app: FastAPI, session: Session) -> None:
    """With the limit used up, a rotating X-Forwarded-For must not buy new attempts."""
    make_user(session, "target")
    app.state.limits.signin_client.events = 3
    with TestClient(app) as client:
        answers = [
            client.post(
                "/api/v1/auth/token", json={"username": "target", "password": "wrong-password"},
                headers={"X-Forwarded-For": f"203.0.113.{i}"},
            ).status_code
            for i in range(8)
        ]  # fmt: skip
    assert answers == [401] * 3 + [429] * 5


def test_a_trusted_proxy_names_the_client(settings: Settings, session_factory, reader_factory) -> None:  # type: ignore[no-untyped-def]
    settings.trusted_proxies = "testclient, 10.0.0.0/8"
    app = create_app(settings)
    app.state.sessionmaker, app.state.readers = session_factory, reader_factory
    app.state.limits.signin_client.events = 2
    with TestClient(app) as client:

        def attempt(address: str) -> int:
            body = {"username": "nobody", "password": "wrong-password"}
            return client.post("/api/v1/auth/token", json=body, headers={"X-Forwarded-For": address}).status_code

        assert [attempt("198.51.100.7") for _ in range(3)] == [401, 401, 429]
        assert attempt("198.51.100.8") == 401  # another client behind the same proxy
        # A proxy appends; only the address the trusted proxy saw counts, not what the client wrote before it.
        assert attempt("198.51.100.8, 198.51.100.7") == 429
