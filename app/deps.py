"""Request-scoped dependencies, as Annotated aliases routes can name."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

from fastapi import Depends, Request
from sqlalchemy.orm import Session

from app.config import Settings
from app.db import session_scope


def get_session(request: Request) -> Iterator[Session]:
    """One session per request, committed when the route returns without error."""
    with session_scope(request.app.state.sessionmaker) as session:
        yield session


def get_app_settings(request: Request) -> Settings:
    return request.app.state.settings  # type: ignore[no-any-return]


SessionDep = Annotated[Session, Depends(get_session)]
SettingsDep = Annotated[Settings, Depends(get_app_settings)]
