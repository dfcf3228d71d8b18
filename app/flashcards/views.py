"""Flashcard pages: decks, browse, study (htmx), card info, statistics, settings, export."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from urllib.parse import urlencode
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.db import utcnow
from app.deps import MAX_ROW_ID, CurrentUser, OptionalUser, SessionDep
from app.errors import Conflict, InvalidInput
from app.flashcards import charts, export, missed, personal, preferences, service, study
from app.flashcards.scheduling import RATING_MAP, format_interval
from app.web.templating import render

router = APIRouter(prefix="/flashcards", tags=["flashcards"])
RATING_NAMES = {raw: rating.name for raw, rating in RATING_MAP.items()}


def fuzzing(request: Request) -> bool:
    """Interval fuzzing is on unless the app turned it off (the tests do)."""
    return bool(getattr(request.app.state, "flashcards_fuzzing", True))


def _is_htmx(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


def _clock(time_zone: str) -> Any:
    zone = ZoneInfo(time_zone)

    def local(moment: datetime | None, fmt: str = "%Y-%m-%d %H:%M") -> str:
        return moment.astimezone(zone).strftime(fmt) if moment else "—"

    return local


@router.get("", response_class=HTMLResponse)
def deck_list(request: Request, session: SessionDep, user: OptionalUser) -> HTMLResponse:
    mine = len(personal.list_cards(user.id, session=session)) if user else None
    return render(request, "flashcards/list.html", {"decks": service.list_decks(session=session), "mine": mine})


@router.get("/settings", response_class=HTMLResponse)
def settings_page(request: Request, session: SessionDep, user: CurrentUser) -> HTMLResponse:
    prefs = preferences.get_prefs(user.id, session=session)
    return _settings(request, preferences.SettingsForm(
        f"{prefs.desired_retention:.2f}", str(prefs.new_per_day), str(prefs.reviews_per_day),
        preferences.steps_text(prefs.learning_steps), preferences.steps_text(prefs.relearning_steps), prefs.time_zone,
    ), preferences.shortcuts_on(user.id, session=session))  # fmt: skip


def _settings(request: Request, form: preferences.SettingsForm, shortcuts: bool, **extra: Any) -> HTMLResponse:
    ctx = {"form": form, "zones": preferences.time_zones(), "low_high": preferences.RETENTION_RANGE,
           "shortcuts": shortcuts, **extra}  # fmt: skip
    return render(request, "flashcards/settings.html", ctx, status_code=422 if "error" in extra else 200)


@router.post("/settings", response_class=HTMLResponse)
def save_settings(
    request: Request, session: SessionDep, user: CurrentUser,
    desired_retention: Annotated[str, Form(max_length=20)], new_per_day: Annotated[str, Form(max_length=10)],
    reviews_per_day: Annotated[str, Form(max_length=10)], learning_steps: Annotated[str, Form(max_length=200)] = "",
    relearning_steps: Annotated[str, Form(max_length=200)] = "", time_zone: Annotated[str, Form(max_length=64)] = "UTC",
    keyboard_shortcuts: Annotated[Literal["on", "off"], Form()] = "on",
) -> HTMLResponse:  # fmt: skip
    form = preferences.SettingsForm(
        desired_retention, new_per_day, reviews_per_day, learning_steps, relearning_steps, time_zone
    )
    shortcuts = keyboard_shortcuts == "on"
    try:
        preferences.save(user.id, preferences.parse(form), session=session)
    except InvalidInput as exc:
        return _settings(request, form, shortcuts, error=exc.message, field=exc.field)
    preferences.set_shortcuts(user.id, shortcuts, session=session)
    return _settings(request, form, shortcuts, notice="Settings saved.")


def _missed(request: Request, user_id: int, focus: missed.Focus, session: Any, notice: str | None = None,
            status_code: int = 200, announce: str | None = None) -> HTMLResponse:  # fmt: skip
    view = missed.focus_view(user_id, session=session, now=utcnow(), focus=focus)
    ctx = {
        "view": view, "attempt": focus.attempt, "focus": focus, "notice": notice, "names": RATING_NAMES,
        "announce": announce, "intervals": {raw: format_interval(d) for raw, d in view.intervals.items()},
        "shortcuts": preferences.shortcuts_on(user_id, session=session),
    }  # fmt: skip
    block = "reviewer" if _is_htmx(request) else None
    return render(request, "flashcards/missed.html", ctx, block=block, status_code=status_code)


def _missed_after(request: Request, user_id: int, focus: missed.Focus, session: Any, notice: str | None = None,
                  announce: str | None = None) -> Response:  # fmt: skip
    if not _is_htmx(request):
        query = urlencode(focus.fields())
        return RedirectResponse("/flashcards/missed" + (f"?{query}" if query else ""), status_code=303)
    return _missed(request, user_id, focus, session, notice, announce=announce)


# Which focused session a page or a form names: one attempt's missed questions, or one failed lab check.
AttemptField = Annotated[int | None, Form(ge=1, le=MAX_ROW_ID)]
SubmissionField = Annotated[int | None, Form(ge=1, le=MAX_ROW_ID)]
CheckField = Annotated[str | None, Form(max_length=80)]


@router.get("/missed", response_class=HTMLResponse)
def missed_page(
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    attempt: Annotated[int | None, Query(ge=1, le=MAX_ROW_ID)] = None,
    submission: Annotated[int | None, Query(ge=1, le=MAX_ROW_ID)] = None,
    check: Annotated[str | None, Query(max_length=80)] = None,
) -> HTMLResponse:
    """Study only the cards of missed quiz questions (one attempt's, or all still pending), or of a failed lab check."""
    return _missed(request, user.id, missed.Focus(attempt, submission, check), session)


@router.post("/missed/rate", response_class=HTMLResponse)
def missed_rate(
    request: Request, session: SessionDep, user: CurrentUser,
    card_id: Annotated[str, Form(max_length=80)], rating: Annotated[int, Form(ge=1, le=5)],
    version: Annotated[int, Form()], duration_ms: Annotated[int | None, Form(ge=0, le=86_400_000)] = None,
    attempt: AttemptField = None, submission: SubmissionField = None, check: CheckField = None,
) -> Response:  # fmt: skip
    now, focus = utcnow(), missed.Focus(attempt, submission, check)
    try:
        rated = study.rate(user.id, card_id, rating, session=session, now=now, duration_ms=duration_ms,
                           expected_version=version, fuzz=fuzzing(request), course_id=user.course_id)  # fmt: skip
    except Conflict as exc:
        return _missed(request, user.id, focus, session, exc.message, status_code=409)
    return _missed_after(request, user.id, focus, session, announce=rated_message(rating, rated.snap.due, now))


@router.post("/missed/undo", response_class=HTMLResponse)
def missed_undo(
    request: Request, session: SessionDep, user: CurrentUser,
    attempt: AttemptField = None, submission: SubmissionField = None, check: CheckField = None,
) -> Response:  # fmt: skip
    now, focus = utcnow(), missed.Focus(attempt, submission, check)
    cards = missed.session_cards(user.id, focus, session=session, now=now)
    try:
        study.undo(user.id, session=session, now=now, card_ids=cards)
    except Conflict as exc:
        return _missed_after(request, user.id, focus, session, exc.message)
    return _missed_after(request, user.id, focus, session, "Undone: the card is back as it was.")


@router.post("/missed/bury", response_class=HTMLResponse)
def missed_bury(
    request: Request, session: SessionDep, user: CurrentUser, card_id: Annotated[str, Form(max_length=80)],
    attempt: AttemptField = None, submission: SubmissionField = None, check: CheckField = None,
) -> Response:  # fmt: skip
    study.bury(user.id, card_id, session=session, now=utcnow())
    return _missed_after(request, user.id, missed.Focus(attempt, submission, check), session, "Buried until tomorrow.")


@router.post("/missed/suspend", response_class=HTMLResponse)
def missed_suspend(
    request: Request, session: SessionDep, user: CurrentUser, card_id: Annotated[str, Form(max_length=80)],
    attempt: AttemptField = None, submission: SubmissionField = None, check: CheckField = None,
) -> Response:  # fmt: skip
    study.set_suspended(user.id, card_id, True, session=session, now=utcnow())
    notice = "Suspended. Unsuspend it from the card's info page."
    return _missed_after(request, user.id, missed.Focus(attempt, submission, check), session, notice)


@router.get("/{deck_id}", response_class=HTMLResponse)
def deck_page(
    deck_id: str, request: Request, session: SessionDep, user: OptionalUser,
    q: Annotated[str, Query(max_length=200)] = "", topic: Annotated[str, Query(max_length=200)] = "",
    state: Annotated[str, Query(max_length=20)] = "",
) -> HTMLResponse:  # fmt: skip
    found = service.browse(
        deck_id, session=session, user_id=user.id if user else None, now=utcnow(), text=q, topic=topic, state=state
    )
    ctx = {"browse": found, "deck": found.deck, "q": q, "topic": topic, "state": state,
           "states": service.STATE_FILTERS}  # fmt: skip
    return render(request, "flashcards/deck.html", ctx, block="results" if _is_htmx(request) else None)


def _study(request: Request, user_id: int, deck_id: str, session: Any, notice: str | None = None,
           status_code: int = 200, announce: str | None = None) -> HTMLResponse:  # fmt: skip
    now = utcnow()
    view = study.study_view(user_id, deck_id, session=session, now=now)
    tz = preferences.get_prefs(user_id, session=session).time_zone
    ctx = {
        "view": view, "deck": view.deck, "notice": notice, "local": _clock(tz), "names": RATING_NAMES,
        "intervals": {raw: format_interval(d) for raw, d in view.intervals.items()}, "announce": announce,
        "shortcuts": preferences.shortcuts_on(user_id, session=session),
    }  # fmt: skip
    block = "reviewer" if _is_htmx(request) else None
    return render(request, "flashcards/study.html", ctx, block=block, status_code=status_code)


@router.get("/{deck_id}/study", response_class=HTMLResponse)
def study_page(deck_id: str, request: Request, session: SessionDep, user: CurrentUser) -> HTMLResponse:
    return _study(request, user.id, deck_id, session)


def _after(request: Request, deck_id: str, user_id: int, session: Any, notice: str | None = None,
           announce: str | None = None) -> Response:  # fmt: skip
    if not _is_htmx(request):
        return RedirectResponse(f"/flashcards/{deck_id}/study", status_code=303)
    return _study(request, user_id, deck_id, session, notice, announce=announce)


def rated_message(rating: int, due: datetime | None, now: datetime) -> str:
    """What a screen reader says once a card is rated: the rating and when the card comes back."""
    back = f" The card comes back in {format_interval(due - now)}." if due is not None else ""
    return f"Rated {RATING_NAMES[rating]}.{back}"


@router.post("/{deck_id}/study/rate", response_class=HTMLResponse)
def rate(
    deck_id: str, request: Request, session: SessionDep, user: CurrentUser,
    card_id: Annotated[str, Form(max_length=80)], rating: Annotated[int, Form(ge=1, le=5)],
    version: Annotated[int, Form()], duration_ms: Annotated[int | None, Form(ge=0, le=86_400_000)] = None,
) -> Response:  # fmt: skip
    now = utcnow()
    try:
        rated = study.rate(user.id, card_id, rating, session=session, now=now, duration_ms=duration_ms,
                           expected_version=version, fuzz=fuzzing(request), course_id=user.course_id)  # fmt: skip
    except Conflict as exc:
        return _study(request, user.id, deck_id, session, exc.message, status_code=409)
    return _after(request, deck_id, user.id, session, announce=rated_message(rating, rated.snap.due, now))


@router.post("/{deck_id}/study/undo", response_class=HTMLResponse)
def undo(deck_id: str, request: Request, session: SessionDep, user: CurrentUser) -> Response:
    try:
        study.undo(user.id, session=session, now=utcnow(), deck_id=deck_id)
    except Conflict as exc:
        return _after(request, deck_id, user.id, session, exc.message)
    return _after(request, deck_id, user.id, session, "Undone: the card is back as it was.")


@router.post("/{deck_id}/study/bury", response_class=HTMLResponse)
def bury(
    deck_id: str, request: Request, session: SessionDep, user: CurrentUser, card_id: Annotated[str, Form(max_length=80)]
) -> Response:
    study.bury(user.id, card_id, session=session, now=utcnow())
    return _after(request, deck_id, user.id, session, "Buried until tomorrow.")


@router.post("/{deck_id}/study/suspend", response_class=HTMLResponse)
def suspend(
    deck_id: str, request: Request, session: SessionDep, user: CurrentUser, card_id: Annotated[str, Form(max_length=80)]
) -> Response:
    study.set_suspended(user.id, card_id, True, session=session, now=utcnow())
    return _after(request, deck_id, user.id, session, "Suspended. Unsuspend it from the card's info page.")


@router.get("/{deck_id}/cards/{card_id}", response_class=HTMLResponse)
def card_info(deck_id: str, card_id: str, request: Request, session: SessionDep, user: CurrentUser) -> HTMLResponse:
    info = service.card_info(user.id, card_id, session=session, now=utcnow())
    tz = preferences.get_prefs(user.id, session=session).time_zone
    ctx = {"info": info, "deck_id": deck_id, "local": _clock(tz), "names": RATING_NAMES}
    return render(request, "flashcards/card.html", ctx)


@router.post("/{deck_id}/cards/{card_id}/suspend")
def toggle_suspend(
    deck_id: str, card_id: str, session: SessionDep, user: CurrentUser, suspended: Annotated[bool, Form()]
) -> RedirectResponse:
    study.set_suspended(user.id, card_id, suspended, session=session, now=utcnow())
    return RedirectResponse(f"/flashcards/{deck_id}/cards/{card_id}", status_code=303)


@router.get("/{deck_id}/stats", response_class=HTMLResponse)
def stats_page(deck_id: str, request: Request, session: SessionDep, user: CurrentUser) -> HTMLResponse:
    deck, figures = service.deck_stats(user.id, deck_id, session=session, now=utcnow())
    labels = {int(k): v for k, v in deck.rating_labels.items()}
    pictures = {
        "heatmap": charts.heatmap(figures), "forecast": charts.forecast(figures), "counts": charts.counts(figures),
        "buttons": charts.buttons(figures, {k: f"{RATING_NAMES[k]}" for k in RATING_NAMES} | {}),
    }  # fmt: skip
    tables = {
        "heatmap": charts.heatmap_table(figures), "forecast": charts.forecast_table(figures),
        "buttons": charts.buttons_table(figures, RATING_NAMES),
    }  # fmt: skip
    return render(request, "flashcards/stats.html", {"deck": deck, "stats": figures, "charts": pictures,
                                                      "tables": tables, "labels": labels})  # fmt: skip


@router.get("/{deck_id}/export.apkg")
def export_apkg(deck_id: str, session: SessionDep) -> Response:
    deck, cards = service.get_deck(deck_id, session=session)
    headers = {"Content-Disposition": f'attachment; filename="{deck.id}.apkg"'}
    return Response(export.build_apkg(deck, cards), media_type="application/octet-stream", headers=headers)
