"""Lab pages: statement, editor, submissions and results."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(tags=["labs"])
