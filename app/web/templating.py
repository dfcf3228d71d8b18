"""Jinja2 templates; a page's named blocks render alone as htmx partials."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2_fragments.fastapi import Jinja2Blocks

from app.config import REPO_ROOT

templates = Jinja2Blocks(directory=str(REPO_ROOT / "templates"))


def render(
    request: Request,
    name: str,
    context: dict[str, Any] | None = None,
    *,
    block: str | None = None,
    status_code: int = 200,
) -> HTMLResponse:
    """Render ``name``; with ``block``, only that block (an htmx partial)."""
    ctx = {"request": request, **(context or {})}
    if block is not None:
        return templates.TemplateResponse(request, name, ctx, block_name=block, status_code=status_code)  # type: ignore[return-value]
    return templates.TemplateResponse(request, name, ctx, status_code=status_code)  # type: ignore[return-value]
