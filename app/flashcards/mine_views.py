"""Pages of a student's own cards (/flashcards/mine): the list, studying, making one from a quiz question, export.

Registered before the deck pages, whose ``/flashcards/{deck_id}`` would otherwise take ``mine``.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.db import utcnow
from app.deps import MAX_ROW_ID, CurrentUser, RowId, SessionDep
from app.errors import Conflict
from app.flashcards import export, personal, personal_study, preferences
from app.flashcards.models import STATE_NAMES, PersonalCard
from app.flashcards.scheduling import format_interval
from app.flashcards.views import RATING_NAMES, _clock, _is_htmx, fuzzing, rated_message
from app.web.templating import render

router = APIRouter(prefix=f"/flashcards/{personal.MINE}", tags=["flashcards"])
CardId = Annotated[int, Form(ge=1, le=MAX_ROW_ID)]
NOTICES = {"deleted": "Card deleted.", "unsuspended": "Unsuspended: the card is back in your queue."}


def info_url(card: PersonalCard) -> str:
    return f"/flashcards/{personal.MINE}#mine-{card.id}"


@router.get("", response_class=HTMLResponse)
def my_cards(
    request: Request, session: SessionDep, user: CurrentUser, done: Annotated[str, Query(max_length=20)] = ""
) -> HTMLResponse:
    """The student's own cards, each with its state and a Delete button."""
    cards = personal.list_cards(user.id, session=session)
    ctx = {"deck": personal.MyDeck(), "cards": cards, "states": STATE_NAMES, "notice": NOTICES.get(done),
           "now": utcnow(), "personal": True}  # fmt: skip
    return render(request, "flashcards/mine.html", ctx)


@router.post("/cards/{card_id}/delete")
def delete(card_id: RowId, session: SessionDep, user: CurrentUser) -> RedirectResponse:
    personal.delete_card(user.id, card_id, session=session)
    return RedirectResponse(f"/flashcards/{personal.MINE}?done=deleted", status_code=303)


@router.post("/cards/{card_id}/unsuspend")
def unsuspend(card_id: RowId, session: SessionDep, user: CurrentUser) -> RedirectResponse:
    personal_study.set_suspended(user.id, card_id, False, session=session, now=utcnow())
    return RedirectResponse(f"/flashcards/{personal.MINE}?done=unsuspended#mine-{card_id}", status_code=303)


@router.post("/from-question", response_class=HTMLResponse)
def from_question(
    request: Request, session: SessionDep, user: CurrentUser,
    attempt: Annotated[int, Form(ge=1, le=MAX_ROW_ID)], question: Annotated[str, Form(min_length=1, max_length=80)],
) -> Response:  # fmt: skip
    """Make a card from a question missed in an attempt (or find the one made before)."""
    card, made = personal.make_from_question(user.id, attempt, question, session=session, now=utcnow())
    if not _is_htmx(request):
        return RedirectResponse(f"/quizzes/attempts/{attempt}/result#make-{question}", status_code=303)
    return render(request, "flashcards/_made.html", {"card": card, "made": made, "question_id": question})


@router.get("/export.apkg")
def export_apkg(session: SessionDep, user: CurrentUser) -> Response:
    deck, cards = personal.export_deck(user.id, session=session)
    headers = {"Content-Disposition": 'attachment; filename="my-cards.apkg"'}
    return Response(export.build_apkg(deck, cards), media_type="application/octet-stream", headers=headers)


def _study(request: Request, user_id: int, session: Any, notice: str | None = None, status_code: int = 200,
           announce: str | None = None) -> HTMLResponse:  # fmt: skip
    view = personal_study.study_view(user_id, session=session, now=utcnow())
    tz = preferences.get_prefs(user_id, session=session).time_zone
    ctx = {
        "view": view, "deck": view.deck, "notice": notice, "local": _clock(tz), "names": RATING_NAMES,
        "intervals": {raw: format_interval(d) for raw, d in view.intervals.items()}, "announce": announce,
        "shortcuts": preferences.shortcuts_on(user_id, session=session), "personal": True, "info_url_of": info_url,
    }  # fmt: skip
    block = "reviewer" if _is_htmx(request) else None
    return render(request, "flashcards/study.html", ctx, block=block, status_code=status_code)


def _after(request: Request, user_id: int, session: Any, notice: str | None = None,
           announce: str | None = None) -> Response:  # fmt: skip
    if not _is_htmx(request):
        return RedirectResponse(f"/flashcards/{personal.MINE}/study", status_code=303)
    return _study(request, user_id, session, notice, announce=announce)


@router.get("/study", response_class=HTMLResponse)
def study_page(request: Request, session: SessionDep, user: CurrentUser) -> HTMLResponse:
    return _study(request, user.id, session)


@router.post("/study/rate", response_class=HTMLResponse)
def rate(
    request: Request, session: SessionDep, user: CurrentUser, card_id: CardId, rating: Annotated[int, Form(ge=1, le=5)],
    version: Annotated[int, Form()], duration_ms: Annotated[int | None, Form(ge=0, le=86_400_000)] = None,
) -> Response:  # fmt: skip
    now = utcnow()
    try:
        after = personal_study.rate(user.id, card_id, rating, session=session, now=now, duration_ms=duration_ms,
                                    expected_version=version, fuzz=fuzzing(request))  # fmt: skip
    except Conflict as exc:
        return _study(request, user.id, session, exc.message, status_code=409)
    return _after(request, user.id, session, announce=rated_message(rating, after.due, now))


@router.post("/study/undo", response_class=HTMLResponse)
def undo(request: Request, session: SessionDep, user: CurrentUser) -> Response:
    try:
        personal_study.undo(user.id, session=session, now=utcnow())
    except Conflict as exc:
        return _after(request, user.id, session, exc.message)
    return _after(request, user.id, session, "Undone: the card is back as it was.")


@router.post("/study/bury", response_class=HTMLResponse)
def bury(request: Request, session: SessionDep, user: CurrentUser, card_id: CardId) -> Response:
    personal_study.bury(user.id, card_id, session=session, now=utcnow())
    return _after(request, user.id, session, "Buried until tomorrow.")


@router.post("/study/suspend", response_class=HTMLResponse)
def suspend(request: Request, session: SessionDep, user: CurrentUser, card_id: CardId) -> Response:
    personal_study.set_suspended(user.id, card_id, True, session=session, now=utcnow())
    return _after(request, user.id, session, "Suspended. Unsuspend it on your cards page.")
