"""Sign-up and sign-in as the HTML pages and the JSON API both run them, rate limits included."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from app.accounts import service
from app.accounts.models import User
from app.accounts.ratelimit import Limit, release, take
from app.config import Settings
from app.courses import service as courses
from app.courses.models import CourseRole
from app.db import session_scope
from app.errors import DomainError
from app.flashcards import preferences


@dataclass
class AuthLimits:
    """The sign-in and sign-up limits (counted in the database: app.accounts.ratelimit)."""

    signin_client: Limit
    signin_account: Limit
    signup_client: Limit

    @classmethod
    def from_settings(cls, settings: Settings) -> AuthLimits:
        return cls(
            Limit("signin_client", settings.signin_limit_per_client, 300),
            Limit("signin_account", settings.signin_limit_per_account, 900),
            Limit("signup_client", settings.signup_limit_per_client, 3600),
        )


def sign_up(
    username: str, password: str, join_code: str | None, client: str, *, session: Session, limits: AuthLimits,
    settings: Settings, now: datetime, time_zone: str | None = None,
) -> User:  # fmt: skip
    """Create a student's account in the course whose join code they gave.

    ``time_zone`` (the browser's, chosen on the form) is where their times show.

    Only accounts created count against the address's limit.
    """
    hit = take(limits.signup_client, client, "sign-ups from this address", session=session, now=now)
    try:
        course_id = courses.course_for_code(join_code, settings.join_code, session=session)
        if time_zone is not None:
            preferences.check_zone(time_zone)
        user = service.register(username, password, session=session)
        courses.enroll(user.id, course_id, CourseRole.student, session=session, now=now)
        if time_zone is not None:
            preferences.set_time_zone(user.id, time_zone, session=session)
        return user
    except DomainError:
        # The HTML form commits the request after showing the error: the count must go now.
        release(hit, session=session)
        raise


def sign_in(
    username: str, password: str, client: str, *, session: Session, limits: AuthLimits, now: datetime,
    counter: sessionmaker[Session],
) -> User:  # fmt: skip
    """The user, if the password is right. Every attempt counts against the address, failures against the account.

    The counts are committed in a transaction of their own (``counter``), before the password is
    checked: a failed sign-in rolls the request back, and its count must stay. Run it before the
    request's own session has begun (on SQLite both would want the one write lock).
    """
    account = username.strip().lower()
    with session_scope(counter) as own:
        take(limits.signin_client, client, "sign-in attempts from this address", session=own, now=now)
        # Counted as a failure until the password proves right, so that parallel guesses cannot
        # all pass the check before any of them is counted.
        failure = take(limits.signin_account, account, "failed sign-ins for this account", session=own, now=now)
    user = service.authenticate(username, password, session=session)
    release(failure, session=session)
    return user
