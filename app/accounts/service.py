"""Accounts: registration, password checks, browser sessions and API tokens.

Tokens are random, shown once, and stored as SHA-256 digests, so a database
leak gives no usable session. Passwords are hashed with Argon2 (pwdlib).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any, cast

from pwdlib import PasswordHash
from sqlalchemy import Table, bindparam, delete, select
from sqlalchemy.orm import Session

from app.accounts.models import ApiToken, AuthSession, Role, User
from app.errors import Conflict, InvalidInput, Unauthorized

USERNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{2,39}$")
MIN_PASSWORD = 10
MAX_PASSWORD = 256  # Argon2 is slow on purpose; unbounded input would be a DoS.


@lru_cache(maxsize=1)
def hasher() -> PasswordHash:
    return PasswordHash.recommended()


@lru_cache(maxsize=1)
def _dummy_hash() -> str:
    return hasher().hash("timing-equaliser-not-a-password")


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def validate_credentials(username: str, password: str) -> None:
    if not USERNAME.match(username):
        raise InvalidInput(
            "Usernames are 3 to 40 characters: letters, digits, '.', '_' or '-', starting with a letter or digit.",
            field="username",
        )
    if len(password) < MIN_PASSWORD:
        raise InvalidInput(f"Passwords need at least {MIN_PASSWORD} characters.", field="password")
    if len(password) > MAX_PASSWORD:
        raise InvalidInput(f"Passwords can be at most {MAX_PASSWORD} characters.", field="password")


def find_user(username: str, *, session: Session) -> User | None:
    return session.scalars(select(User).where(User.username_key == username.lower())).first()


def register(username: str, password: str, *, session: Session, role: Role = Role.student) -> User:
    """Create an account. Raises InvalidInput or Conflict, changing nothing."""
    username = username.strip()
    validate_credentials(username, password)
    if find_user(username, session=session) is not None:
        raise Conflict(f"The username '{username}' is taken. Choose another.", field="username")
    user = User(username=username, username_key=username.lower(), password_hash=hasher().hash(password), role=role)
    session.add(user)
    session.flush()
    return user


def authenticate(username: str, password: str, *, session: Session) -> User:
    """The user whose password this is. Unknown user and wrong password read the same."""
    user = find_user(username.strip(), session=session) if len(password) <= MAX_PASSWORD else None
    # An account without a password (made by an LMS: "!..." is no hash) opens only from there, or after a reset.
    if user is None or user.password_hash.startswith("!"):
        hasher().verify(password[:MAX_PASSWORD], _dummy_hash())  # same cost as a real check
        raise Unauthorized("Wrong username or password.")
    valid, new_hash = hasher().verify_and_update(password, user.password_hash)
    if not valid:
        raise Unauthorized("Wrong username or password.")
    if new_hash:
        user.password_hash = new_hash
    return user


def set_password(user: User, password: str) -> None:
    validate_credentials(user.username, password)
    user.password_hash = hasher().hash(password)


@dataclass(frozen=True)
class Issued:
    token: str
    expires_at: datetime


def start_session(user: User, *, session: Session, now: datetime, ttl: timedelta) -> Issued:
    token = secrets.token_urlsafe(32)
    # Expired sessions are only read elsewhere (to say "expired"); they are cleared here.
    session.execute(delete(AuthSession).where(AuthSession.user_id == user.id, AuthSession.expires_at <= now))
    session.add(AuthSession(id=digest(token), user_id=user.id, created_at=now, expires_at=now + ttl))
    return Issued(token, now + ttl)


def end_session(token: str | None, *, session: Session) -> None:
    if token:
        session.execute(delete(AuthSession).where(AuthSession.id == digest(token)))


def session_user(token: str | None, *, session: Session, now: datetime) -> tuple[User | None, bool]:
    """The user behind a session cookie, and whether the cookie named an expired session."""
    if not token:
        return None, False
    row = session.get(AuthSession, digest(token))
    if row is None:
        return None, False
    if row.expires_at <= now:
        return None, True
    return row.user, False


def issue_api_token(user: User, *, session: Session, now: datetime, ttl: timedelta) -> Issued:
    token = secrets.token_urlsafe(32)
    session.add(ApiToken(id=digest(token), user_id=user.id, created_at=now, expires_at=now + ttl))
    return Issued(token, now + ttl)


# Built once, on the tables: it runs on every API request.
USERS, _TOKENS = cast(Table, User.__table__), cast(Table, ApiToken.__table__)
TOKEN_USER = (
    select(USERS.c.id, USERS.c.username, USERS.c.role)
    .select_from(USERS.join(_TOKENS, _TOKENS.c.user_id == USERS.c.id))
    .where(_TOKENS.c.id == bindparam("digest"), _TOKENS.c.expires_at > bindparam("now"))
)


def token_params(token: str, now: datetime) -> dict[str, Any]:
    """The parameters of ``TOKEN_USER`` (and of statements built on it) for ``token`` at ``now``."""
    return {"digest": digest(token), "now": now}
