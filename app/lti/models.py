"""LTI tables: registered platforms and their deployments, the tool's keys, who is who, which LMS course is
which Ringlab course, the LMS gradebook columns, short-lived launch state, and the grade outbox."""

from __future__ import annotations

import enum
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Enum, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base, UTCDateTime, utcnow


class Platform(Base):
    """An LMS registration: one issuer and the client id it gave Ringlab (an issuer may register several)."""

    __tablename__ = "lti_platforms"
    __table_args__ = (UniqueConstraint("issuer", "client_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(120))
    issuer: Mapped[str] = mapped_column(String(300))
    client_id: Mapped[str] = mapped_column(String(300))
    auth_login_url: Mapped[str] = mapped_column(String(500))
    auth_token_url: Mapped[str] = mapped_column(String(500))
    key_set_url: Mapped[str] = mapped_column(String(500))
    auth_audience: Mapped[str | None] = mapped_column(String(500))  # the token endpoint's audience, if not its URL
    # Origins allowed to show Ringlab in a frame, space-separated, beside the issuer's and the login URL's own
    # (Canvas serves courses from the school's host, not from its issuer's).
    frame_origins: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class Deployment(Base):
    __tablename__ = "lti_deployments"
    __table_args__ = (UniqueConstraint("platform_id", "deployment_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"), index=True)
    deployment_id: Mapped[str] = mapped_column(String(300))


class ToolKey(Base):
    """One of Ringlab's signing keys. The newest unretired one signs; a retired one is still published until
    every token it signed has expired (``app.lti.keys``)."""

    __tablename__ = "lti_tool_keys"

    kid: Mapped[str] = mapped_column(String(64), primary_key=True)
    private_pem: Mapped[str] = mapped_column(Text)
    public_jwk: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    retired_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class Identity(Base):
    """A person of an LMS: (platform = issuer + client id, ``sub``) → a Ringlab account. Never by email."""

    __tablename__ = "lti_identities"
    __table_args__ = (UniqueConstraint("platform_id", "sub"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    sub: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)


class ContextLink(Base):
    """An LMS course (context) and the Ringlab course it is; the service URLs its launches last named."""

    __tablename__ = "lti_contexts"
    __table_args__ = (UniqueConstraint("platform_id", "context_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    platform_id: Mapped[int] = mapped_column(ForeignKey("lti_platforms.id", ondelete="CASCADE"))
    context_id: Mapped[str] = mapped_column(String(255))
    title: Mapped[str] = mapped_column(String(300), default="")
    course_id: Mapped[str | None] = mapped_column(ForeignKey("courses.id"), index=True)
    deployment_id: Mapped[str] = mapped_column(String(300), default="")
    lineitems_url: Mapped[str | None] = mapped_column(String(500))
    memberships_url: Mapped[str | None] = mapped_column(String(500))
    ags_scopes: Mapped[list[str]] = mapped_column(JSON, default=list)
    linked_by_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    roster_pulled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)


class LineItem(Base):
    """An LMS gradebook column for one of our items ("quiz:<id>", "lab:<id>") in one LMS course."""

    __tablename__ = "lti_line_items"
    __table_args__ = (UniqueConstraint("context_pk", "resource"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    context_pk: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"))
    resource: Mapped[str] = mapped_column(String(120))
    url: Mapped[str | None] = mapped_column(String(500))  # None: not found in the LMS (yet)
    label: Mapped[str] = mapped_column(String(300), default="")
    score_maximum: Mapped[float | None] = mapped_column(Float)


class StoredValue(Base):
    """pylti1p3's launch data storage, in the database so every web process sees it: OIDC state, nonces
    (deleted when checked: single use) and validated launches, each with an expiry."""

    __tablename__ = "lti_store"

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    value: Mapped[Any] = mapped_column(JSON)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)


class OutboxStatus(enum.StrEnum):
    pending = "pending"  # to send (again): new, changed, or failed and waiting for its next try
    sent = "sent"
    skipped = "skipped"  # nothing to send to: the LMS has no column for the item in that course


class Outbox(Base):
    """The score one student has to have in one LMS column: one row per (context, item, student), so only the
    latest score is ever sent; sent by ``app.lti.outbox`` with back-off, surviving restarts and outages."""

    __tablename__ = "lti_outbox"
    __table_args__ = (
        UniqueConstraint("context_pk", "resource", "user_id"),
        Index("ix_lti_outbox_due", "status", "next_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    context_pk: Mapped[int] = mapped_column(ForeignKey("lti_contexts.id", ondelete="CASCADE"))
    resource: Mapped[str] = mapped_column(String(120))
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"), index=True)
    status: Mapped[OutboxStatus] = mapped_column(Enum(OutboxStatus, native_enum=False, length=20))
    version: Mapped[int] = mapped_column(Integer, default=1)  # bumped by each change; a send records the one it sent
    next_at: Mapped[datetime] = mapped_column(UTCDateTime)
    claimed_until: Mapped[datetime | None] = mapped_column(UTCDateTime)
    tries: Mapped[int] = mapped_column(Integer, default=0)  # failed sends since the last success
    last_error: Mapped[str | None] = mapped_column(Text)
    sent_score: Mapped[float | None] = mapped_column(Float)
    sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    changed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
