"""Exercise pages: sets (contents, filters, badges), one exercise (answer parts, hints, giving up, notes, done)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy.orm import Session

from app.courses import extensions
from app.db import utcnow
from app.deps import CurrentUser, OptionalUser, SessionDep
from app.errors import InvalidInput
from app.exercises import progress, service
from app.labs import catalog
from app.web.templating import render

router = APIRouter(prefix="/exercises", tags=["exercises"])


def _partial(request: Request) -> bool:
    return bool(request.headers.get("hx-request")) and not request.headers.get("hx-history-restore-request")


def _labs(session: Session) -> dict[str, str]:
    """Exercise id -> the id of the lab that grades it (``exercise:`` in the lab's lab.yaml)."""
    labs = catalog.all_labs(session)
    return {lab.spec.exercise: lab.id for lab in labs.values()}


def _difficulty(text: str | None) -> int | None:
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise InvalidInput(f"difficulty must be a whole number of stars, not '{text}'.") from None


@router.get("", response_class=HTMLResponse)
def set_list(request: Request, session: SessionDep, user: OptionalUser) -> HTMLResponse:
    """The exercise sets: a course's own (what its file assigns) for a student in it, else every one."""
    assigned = extensions.assigned(user.course_id, "exercises", session=session) if user and user.in_course else None
    sets = [(s, n) for s, n in service.list_sets(session=session) if assigned is None or s.id in assigned]
    return render(request, "exercises/list.html", {"sets": sets})


@router.get("/{set_id}", response_class=HTMLResponse)
def set_page(
    set_id: str,
    request: Request,
    session: SessionDep,
    user: OptionalUser,
    section: Annotated[str | None, Query()] = None,
    difficulty: Annotated[str | None, Query()] = None,
) -> HTMLResponse:
    filters = service.Filters(section or None, _difficulty(difficulty))
    page = service.set_page(set_id, filters, user.id if user else None, _labs(session), session=session)
    block = "listing" if _partial(request) else None
    return render(request, "exercises/set.html", {"page": page, "set": page.set}, block=block)


def _exercise_url(set_id: str, exercise_id: str) -> str:
    return f"/exercises/{set_id}/{exercise_id}"


@router.get("/{set_id}/{exercise_id}", response_class=HTMLResponse)
def exercise_page(
    set_id: str,
    exercise_id: str,
    request: Request,
    session: SessionDep,
    user: OptionalUser,
    hint: Annotated[str | None, Query(max_length=80)] = None,
) -> Response:
    lab_id = _labs(session).get(exercise_id)
    page = service.exercise_page(set_id, exercise_id, user.id if user else None, lab_id, session=session)
    # ?hint=<part id> opens that part's hint without JavaScript (the part shows it only once offered).
    context: dict[str, object] = {"page": page, "lab_id": lab_id, "errors": {}, "typed": {}, "open_hint": hint}
    return render(request, "exercises/exercise.html", context)


def _part_response(
    request: Request,
    session: SessionDep,
    user_id: int,
    set_id: str,
    part: progress.PartView,
    *,
    error: str | None = None,
    correct: bool | None = None,
    typed: str | None = None,
    hint_open: bool = False,
) -> Response:
    if _partial(request):
        lab_id = _labs(session).get(part.exercise_id)
        page = service.exercise_page(set_id, part.exercise_id, user_id, lab_id, session=session)
        context = {
            "set_id": set_id, "part": part, "error": error, "correct": correct, "badges": page.badges,
            "typed": typed, "hint_open": hint_open,
        }  # fmt: skip
        return render(request, "exercises/_part.html", context, status_code=422 if error else 200)
    return RedirectResponse(f"{_exercise_url(set_id, part.exercise_id)}#part-{part.id}", status_code=303)


@router.post("/{set_id}/{exercise_id}/parts/{part_id}/answer", response_class=HTMLResponse)
def answer(
    set_id: str,
    exercise_id: str,
    part_id: str,
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    value: Annotated[str, Form(max_length=200)] = "",
    hint: Annotated[str, Form(max_length=20)] = "",
) -> Response:
    service.exercise_in_set(set_id, exercise_id, session=session)
    # The answer box keeps what was typed, and a hint the student opened stays open.
    hint_open = hint == "shown"
    try:
        result = progress.answer_part(
            exercise_id, part_id, user.id, value, session=session, now=utcnow(), course_id=user.course_id
        )
    except InvalidInput as exc:
        exercise = progress.get_exercise(exercise_id, session=session)
        part = progress.part_view(exercise, part_id, user.id, session=session)
        if _partial(request):
            return _part_response(
                request, session, user.id, set_id, part, error=exc.message, typed=value, hint_open=hint_open
            )
        lab_id = _labs(session).get(exercise_id)
        page = service.exercise_page(set_id, exercise_id, user.id, lab_id, session=session)
        context = {
            "page": page, "lab_id": lab_id, "errors": {part_id: exc.message}, "typed": {part_id: value},
            "open_hint": part_id if hint_open else None,
        }  # fmt: skip
        return render(request, "exercises/exercise.html", context, status_code=422)
    part = result.part
    return _part_response(
        request, session, user.id, set_id, part, correct=result.correct, typed=value, hint_open=hint_open
    )


@router.get("/{set_id}/{exercise_id}/parts/{part_id}/hint", response_class=HTMLResponse)
def hint(
    set_id: str, exercise_id: str, part_id: str, request: Request, session: SessionDep, user: CurrentUser
) -> Response:
    """The part's hint (htmx), once offered; 409 with the reason before that."""
    exercise = service.exercise_in_set(set_id, exercise_id, session=session)
    part = progress.part_hint(exercise, part_id, user.id, session=session)
    if _partial(request):
        return render(request, "exercises/_hint.html", {"part": part})
    return RedirectResponse(f"{_exercise_url(set_id, exercise_id)}?hint={part_id}#hint-{part_id}", status_code=303)


@router.post("/{set_id}/{exercise_id}/parts/{part_id}/give-up", response_class=HTMLResponse)
def give_up(
    set_id: str, exercise_id: str, part_id: str, request: Request, session: SessionDep, user: CurrentUser
) -> Response:
    """ "Show the answer": the part is recorded as given up and its worked answer shown."""
    service.exercise_in_set(set_id, exercise_id, session=session)
    part = progress.give_up_part(exercise_id, part_id, user.id, session=session, now=utcnow())
    return _part_response(request, session, user.id, set_id, part)


def _notes_response(
    request: Request, set_id: str, exercise_id: str, *, session: SessionDep, user_id: int, saved: str
) -> Response:
    if _partial(request):
        note = progress.get_note(exercise_id, user_id, session=session)
        context = {"set_id": set_id, "exercise_id": exercise_id, "note": note, "saved": saved}
        return render(request, "exercises/_notes.html", context)
    return RedirectResponse(f"{_exercise_url(set_id, exercise_id)}#notes", status_code=303)


@router.post("/{set_id}/{exercise_id}/notes", response_class=HTMLResponse)
def notes(
    set_id: str,
    exercise_id: str,
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    notes: Annotated[str, Form()] = "",
) -> Response:
    service.exercise_in_set(set_id, exercise_id, session=session)
    progress.save_notes(exercise_id, user.id, notes, session=session, now=utcnow())
    return _notes_response(request, set_id, exercise_id, session=session, user_id=user.id, saved="Notes saved.")


@router.post("/{set_id}/{exercise_id}/done", response_class=HTMLResponse)
def done(
    set_id: str,
    exercise_id: str,
    request: Request,
    session: SessionDep,
    user: CurrentUser,
    done: Annotated[bool, Form()] = True,
) -> Response:
    service.exercise_in_set(set_id, exercise_id, session=session)
    progress.set_done(exercise_id, user.id, done, session=session, now=utcnow())
    message = "Marked as done." if done else "Marked as not done."
    return _notes_response(request, set_id, exercise_id, session=session, user_id=user.id, saved=message)
