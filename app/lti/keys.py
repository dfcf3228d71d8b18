"""Ringlab's own signing keys (client assertions, deep-linking responses) and the key set it publishes.

The newest key that is not retired signs. ``rotate`` retires it and makes a new one; a retired key stays in
the published set for ``GRACE`` (longer than anything it signed lives: client assertions last a minute,
deep-linking responses ten), so a platform that cached the old set still verifies what was signed with it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from functools import lru_cache
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from jwcrypto.jwk import JWK
from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from app.lti.models import ToolKey

GRACE = timedelta(hours=1)


def _new_key(now: datetime) -> ToolKey:
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    jwk = JWK.from_pem(pem.encode())
    kid = jwk.thumbprint()  # what pylti1p3 names the key in its JWT headers (Registration.get_kid)
    public = jwk.export_public(as_dict=True)
    public.update({"kid": kid, "alg": "RS256", "use": "sig"})
    return ToolKey(kid=kid, private_pem=pem, public_jwk=public, created_at=now)


def signing_key(*, session: Session, now: datetime) -> ToolKey:
    """The key that signs now, made on first use."""
    key = session.scalars(
        select(ToolKey).where(ToolKey.retired_at.is_(None)).order_by(ToolKey.created_at.desc()).limit(1)
    ).first()
    if key is None:
        key = _new_key(now)
        session.add(key)
        session.flush()
    return key


def rotate(*, session: Session, now: datetime) -> tuple[ToolKey, list[str]]:
    """Retire the signing key(s) and make a new one; returns it and the retired kids."""
    retired = list(session.scalars(select(ToolKey).where(ToolKey.retired_at.is_(None))))
    for key in retired:
        key.retired_at = now
    key = _new_key(now)
    session.add(key)
    session.flush()
    return key, [k.kid for k in retired]


def published(*, session: Session, now: datetime) -> dict[str, list[dict[str, Any]]]:
    """The JWKS: the signing key and the keys retired less than ``GRACE`` ago."""
    signing_key(session=session, now=now)
    keys = session.scalars(
        select(ToolKey)
        .where(or_(ToolKey.retired_at.is_(None), ToolKey.retired_at > now - GRACE))
        .order_by(ToolKey.created_at.desc())
    )
    return {"keys": [dict(k.public_jwk) for k in keys]}


def public_pem(key: ToolKey) -> str:
    return _public_pem(key.private_pem)


@lru_cache(maxsize=8)
def _public_pem(private_pem: str) -> str:
    private = serialization.load_pem_private_key(private_pem.encode(), password=None)
    return (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
