"""Registering an LMS: one issuer + client id, its endpoints, deployments and frame origins."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import InvalidInput
from app.lti import frames, keys
from app.lti.models import Deployment, Platform


@dataclass(frozen=True)
class Registration:
    issuer: str
    client_id: str
    auth_login_url: str
    auth_token_url: str
    key_set_url: str
    deployments: list[str]
    name: str = ""
    auth_audience: str = ""
    frame_origins: list[str] = field(default_factory=list)


def register(r: Registration, *, session: Session, now: datetime) -> tuple[Platform, bool]:
    """Record (or update) the platform; returns it and whether it is new. InvalidInput names a bad URL."""
    urls = [("--auth-login-url", r.auth_login_url), ("--auth-token-url", r.auth_token_url)]
    urls += [("--key-set-url", r.key_set_url), *(("--frame-origin", o) for o in r.frame_origins)]
    for label, url in urls:
        if frames.origin(url) is None:
            raise InvalidInput(f"{label} '{url}' is not an http(s) address.")
    if not r.issuer.strip() or not r.client_id.strip() or not r.deployments:
        raise InvalidInput("An issuer, a client id and at least one deployment id are needed.")
    platform = session.scalars(
        select(Platform).where(Platform.issuer == r.issuer, Platform.client_id == r.client_id)
    ).first()
    created = platform is None
    if platform is None:
        platform = Platform(issuer=r.issuer, client_id=r.client_id, created_at=now)
        session.add(platform)
    platform.name = r.name or platform.name or frames.origin(r.issuer) or r.issuer
    platform.auth_login_url, platform.auth_token_url = r.auth_login_url, r.auth_token_url
    platform.key_set_url, platform.auth_audience = r.key_set_url, r.auth_audience or None
    platform.frame_origins = " ".join(frames.origin(o) or "" for o in r.frame_origins)
    session.flush()
    known = set(session.scalars(select(Deployment.deployment_id).where(Deployment.platform_id == platform.id)))
    for d in dict.fromkeys(r.deployments):
        if d not in known:
            session.add(Deployment(platform_id=platform.id, deployment_id=d))
    keys.signing_key(session=session, now=now)
    session.flush()
    return platform, created
