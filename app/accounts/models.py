"""Users, browser sessions and API tokens. Secrets are stored only as SHA-256 digests."""

from __future__ import annotations

import enum
from datetime import datetime

from sqlalchemy import Enum, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column, relationship

from app.db import Base, UTCDateTime, utcnow


class Role(enum.StrEnum):
    """The site-wide role. What a user may do in a course is their enrollment's role (app.courses)."""

    student = "student"  # an ordinary account
    admin = "admin"  # a site administrator: manages every course, its staff, and accounts


class User(Base):
    __tablename__ = "users"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    username: Mapped[str] = mapped_column(String(40))
    # Lower-cased username: "Alice" and "alice" are the same account.
    username_key: Mapped[str] = mapped_column(String(40), unique=True)
    password_hash: Mapped[str] = mapped_column(String(300))
    role: Mapped[Role] = mapped_column(Enum(Role, native_enum=False, length=20), default=Role.student)
    # From a course roster import (app.courses.roster); personal data, removed with the account.
    full_name: Mapped[str | None] = mapped_column(String(120))
    email: Mapped[str | None] = mapped_column(String(254))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)

    @property
    def is_admin(self) -> bool:
        return self.role == Role.admin


class _Secret:
    """What a browser session and an API token both are: a digest id, whose it is, and when it ends."""

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)


class AuthSession(_Secret, Base):
    """A signed-in browser. The cookie holds the token; the row holds its digest."""

    __tablename__ = "auth_sessions"

    user: Mapped[User] = relationship(lazy="joined")


class ApiToken(_Secret, Base):
    """A bearer token for the JSON API (looked up with its user in one query: app.accounts.service)."""

    __tablename__ = "api_tokens"


class LimitHit(Base):
    """One counted event of a rate limit (a sign-in from an address, a failed sign-in of an account).

    Kept in the database so every web process and replica counts the same events. ``key`` is a
    digest of the address or account name, never the value itself.
    """

    __tablename__ = "auth_limit_hits"
    __table_args__ = (Index("ix_auth_limit_hits_bucket_key_at", "bucket", "key", "at"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    bucket: Mapped[str] = mapped_column(String(20))
    key: Mapped[str] = mapped_column(String(32))
    at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class PasswordReset(Base):
    """A one-time link that sets a new password: staff or the terminal make it, its owner uses it once.

    ``id`` is the digest of the link's token (the token itself is shown once, never stored). A link
    ends when used, when it expires, or when a newer link is made for the same account.
    """

    __tablename__ = "password_resets"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    # Who made it (None: the terminal, or an account since deleted).
    created_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    used_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
