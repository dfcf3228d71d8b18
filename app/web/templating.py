"""Jinja2 templates; a page's named blocks render alone as htmx partials."""

from __future__ import annotations

from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import pass_context
from jinja2.runtime import Context
from jinja2_fragments.fastapi import Jinja2Blocks
from markupsafe import Markup, escape

from app.config import REPO_ROOT
from labs.verdict import show_points

templates = Jinja2Blocks(directory=str(REPO_ROOT / "templates"))
DATE_TIME = "%d %b %Y, %H:%M %Z"


def local_time(moment: datetime | None, zone: str, fmt: str = DATE_TIME) -> str:
    """``moment`` (UTC-aware) on the wall clock of ``zone``; "—" for none."""
    if moment is None:
        return "—"
    return moment.astimezone(ZoneInfo(zone)).strftime(fmt)


@pass_context
def _localtime(context: Context, moment: datetime | None, fmt: str = DATE_TIME) -> Markup:
    """Template filter: a ``<time>`` in the signed-in student's zone (UTC for visitors)."""
    user = getattr(context["request"].state, "user", None)
    text = local_time(moment, user.time_zone if user else "UTC", fmt)
    if moment is None:
        return Markup(text)
    return Markup('<time datetime="{}">{}</time>').format(escape(moment.isoformat()), text)


templates.env.filters["localtime"] = _localtime
# Lab scores are points to one decimal (partial credit): "7.5", and "10" rather than "10.0".
templates.env.filters["points"] = show_points


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
