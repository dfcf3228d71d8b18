"""JSON API for labs and submissions (bearer token), on the same services as the pages."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/api/v1", tags=["api: labs"])
