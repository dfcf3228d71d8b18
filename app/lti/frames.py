"""Which sites may show Ringlab in a frame: a registered LMS's issuer, login URL and configured origins.

Read on the requests of a browser an LMS launched Ringlab in (``app.web.security``), so cached per process
for a minute: a new ``--frame-origin`` takes effect within that.
"""

from __future__ import annotations

import threading
import time
from urllib.parse import urlsplit

from sqlalchemy.orm import Session, sessionmaker

from app.db import session_scope
from app.lti.models import Platform

TTL = 60.0
Cache = dict[int, tuple[float, str]]  # platform id -> (good until, origins); one per app (``app.state``)
_lock = threading.Lock()


def origin(url: str) -> str | None:
    parts = urlsplit(url.strip())
    return f"{parts.scheme}://{parts.netloc}" if parts.scheme in ("http", "https") and parts.netloc else None


def origins(platform: Platform) -> list[str]:
    found = [origin(platform.issuer), origin(platform.auth_login_url), *map(origin, platform.frame_origins.split())]
    return list(dict.fromkeys(o for o in found if o))


def cached(cache: Cache, platform_id: int) -> str | None:
    with _lock:
        hit = cache.get(platform_id)
    return hit[1] if hit is not None and hit[0] > time.monotonic() else None


def load(cache: Cache, platform_id: int, readers: sessionmaker[Session]) -> str:
    """The space-separated origins (empty for an unknown platform), read and cached."""
    with session_scope(readers) as session:
        platform = session.get(Platform, platform_id)
        value = " ".join(origins(platform)) if platform is not None else ""
    with _lock:
        cache[platform_id] = (time.monotonic() + TTL, value)
    return value
