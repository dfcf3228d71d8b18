"""Site administrators' pages for accounts: the list of every account, and deleting one.

Thin: the listing is ``app.accounts.directory``'s, the deletion and its rules ``app.accounts.deletion``'s.
Deleting asks for the account's username, typed, on a page that first says what will go.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.accounts import deletion, directory
from app.db import utcnow
from app.deps import RequireAdmin, RowId, SessionDep
from app.errors import Conflict, InvalidInput, NotFound
from app.web.templating import render

router = APIRouter(prefix="/admin/users", tags=["admin"])


@router.get("", response_class=HTMLResponse)
def accounts(
    request: Request,
    session: SessionDep,
    admin: RequireAdmin,
    q: Annotated[str, Query(max_length=254)] = "",
    deleted: Annotated[int | None, Query(ge=0)] = None,
) -> HTMLResponse:
    found = directory.accounts(q, session=session)
    return render(request, "accounts/admin_users.html", {"found": found, "deleted": deleted, "me": admin.id})


def _confirm_page(
    request: Request, user_id: int, session: SessionDep, error: InvalidInput | Conflict | None = None
) -> HTMLResponse:
    account = directory.account(user_id, session=session)
    if account is None:
        raise NotFound(f"There is no account #{user_id}: it may have been deleted already.")
    context = {"account": account, "counts": deletion.preview(user_id, session=session), "error": error}
    return render(request, "accounts/admin_delete.html", context, status_code=error.status_code if error else 200)


@router.get("/{user_id}/delete", response_class=HTMLResponse)
def confirm_delete(user_id: RowId, request: Request, session: SessionDep, admin: RequireAdmin) -> HTMLResponse:
    return _confirm_page(request, user_id, session)


@router.post("/{user_id}/delete", response_class=HTMLResponse)
def delete(
    user_id: RowId,
    request: Request,
    session: SessionDep,
    admin: RequireAdmin,
    confirm: Annotated[str, Form(max_length=254)] = "",
) -> Response:
    try:
        done = deletion.delete_account(
            user_id, actor=admin.username, by=admin.id, confirm=confirm, session=session, now=utcnow()
        )
    except (InvalidInput, Conflict) as exc:
        return _confirm_page(request, user_id, session, exc)
    # The notice names no one: the account's name is what was just removed.
    return RedirectResponse(f"/admin/users?deleted={done.total}", status_code=303)
