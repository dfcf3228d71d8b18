"""Sign-up and sign-in as the HTML pages and the JSON API both run them, rate limits included."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session

from app.accounts import service
from app.accounts.models import User
from app.accounts.ratelimit import Limit, SlidingWindow
from app.config import Settings
from app.errors import Forbidden, RateLimited, Unauthorized
from app.flashcards import preferences


@dataclass
class AuthLimits:
    """Per-process counters for sign-in and sign-up attempts."""

    signin_client: SlidingWindow
    signin_account: SlidingWindow
    signup_client: SlidingWindow

    @classmethod
    def from_settings(cls, settings: Settings) -> AuthLimits:
        return cls(
            SlidingWindow(Limit(settings.signin_limit_per_client, 300)),
            SlidingWindow(Limit(settings.signin_limit_per_account, 900)),
            SlidingWindow(Limit(settings.signup_limit_per_client, 3600)),
        )


def _check(window: SlidingWindow, key: str, what: str) -> None:
    wait = window.retry_after(key)
    if wait is not None:
        raise RateLimited(f"Too many {what}. Try again in {wait} seconds.", retry_after=wait)


def sign_up(
    username: str, password: str, join_code: str | None, client: str, *, session: Session, limits: AuthLimits,
    settings: Settings, time_zone: str | None = None,
) -> User:  # fmt: skip
    """Create a student's account; ``time_zone`` (the browser's, chosen on the form) is where their times show."""
    _check(limits.signup_client, client, "sign-ups from this address")
    if settings.join_code and join_code != settings.join_code:
        raise Forbidden("That course join code is not right. Ask your instructor for it.")
    if time_zone is not None:
        preferences.check_zone(time_zone)
    user = service.register(username, password, session=session)
    if time_zone is not None:
        preferences.set_time_zone(user.id, time_zone, session=session)
    limits.signup_client.hit(client)
    return user


def sign_in(username: str, password: str, client: str, *, session: Session, limits: AuthLimits, now: datetime) -> User:
    account = username.strip().lower()
    _check(limits.signin_client, client, "sign-in attempts from this address")
    _check(limits.signin_account, account, "failed sign-ins for this account")
    limits.signin_client.hit(client)
    try:
        return service.authenticate(username, password, session=session)
    except Unauthorized:
        limits.signin_account.hit(account)
        raise
