"""Passwords people can change and recover: a change with the old password, a one-time reset link.

A reset link is made by staff (for a student who forgot) or from the terminal, shown once to be
passed on, and stored as the digest of its token. It works once, until it expires, and only while
it is the newest link of its account. Setting a password either way signs the account out
everywhere else: every other browser session and every API token ends.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta

from sqlalchemy import delete, update
from sqlalchemy.orm import Session

from app.accounts.models import ApiToken, AuthSession, PasswordReset, User
from app.accounts.service import Issued, digest, hasher, set_password
from app.errors import DomainError, InvalidInput, NotFound

RESET_TTL = timedelta(hours=24)


class LinkEnded(DomainError):
    """A reset link that was real but can no longer be used: 410 Gone, with the reason."""

    status_code = 410


def sign_out_everywhere(user: User, *, session: Session, keep: str | None = None) -> None:
    """End every browser session of ``user`` (but the one whose token is ``keep``) and every API token."""
    sessions = delete(AuthSession).where(AuthSession.user_id == user.id)
    if keep:
        sessions = sessions.where(AuthSession.id != digest(keep))
    session.execute(sessions)
    session.execute(delete(ApiToken).where(ApiToken.user_id == user.id))


def change_password(user: User, old: str, new: str, confirm: str, *, session: Session, keep: str | None) -> None:
    """Set ``user``'s password to ``new`` if ``old`` is the current one; the browser ``keep`` stays signed in.

    Raises InvalidInput (changing nothing) for a wrong old password, a new one that is too short or
    too long, or a confirmation that differs.
    """
    # An account an LMS made has no password yet ("!..."): its owner, signed in from the LMS, sets the first.
    first = user.password_hash.startswith("!")
    valid, _ = hasher().verify_and_update(old, user.password_hash) if old and not first else (first, None)
    if not valid:
        raise InvalidInput("That is not your current password.", field="old_password")
    if new != confirm:
        raise InvalidInput("The two new passwords differ: type the same one twice.", field="confirm")
    if new == old:
        raise InvalidInput("The new password is the one you have: choose another.", field="new_password")
    set_password(user, new)
    sign_out_everywhere(user, session=session, keep=keep)


def issue_reset(user: User, *, by: User | None, session: Session, now: datetime, ttl: timedelta = RESET_TTL) -> Issued:
    """A new one-time link's token for ``user`` (any earlier unused link of theirs ends now)."""
    session.execute(
        update(PasswordReset)
        .where(PasswordReset.user_id == user.id, PasswordReset.used_at.is_(None), PasswordReset.expires_at > now)
        .values(expires_at=now)
    )
    token = secrets.token_urlsafe(32)
    session.add(
        PasswordReset(
            id=digest(token), user_id=user.id, created_by_id=by.id if by else None, created_at=now, expires_at=now + ttl
        )
    )
    return Issued(token, now + ttl)


def reset_for(token: str, *, session: Session, now: datetime) -> PasswordReset:
    """The live reset behind ``token``; NotFound for no such link, LinkEnded for a used or expired one."""
    reset = session.get(PasswordReset, digest(token)) if token else None
    if reset is None:
        raise NotFound("This password reset link is not valid: ask your instructor for a new one.")
    if reset.used_at is not None:
        raise LinkEnded("This password reset link was already used: each link works once. Ask for a new one.")
    if reset.expires_at <= now:
        raise LinkEnded("This password reset link has expired (or a newer one was made). Ask for a new one.")
    return reset


def use_reset(token: str, new: str, confirm: str, *, session: Session, now: datetime) -> User:
    """Set the password of the link's account, end the link and every session of the account."""
    reset = reset_for(token, session=session, now=now)
    user = session.get(User, reset.user_id)
    if user is None:  # the account went after the link was made (its resets go with it: a race)
        raise NotFound("This password reset link is not valid: ask your instructor for a new one.")
    if new != confirm:
        raise InvalidInput("The two passwords differ: type the same one twice.", field="confirm")
    set_password(user, new)
    reset.used_at = now
    sign_out_everywhere(user, session=session)
    return user
