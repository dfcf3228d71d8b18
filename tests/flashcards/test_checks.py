"""From a failed lab check to its flashcards: the link on the verdict, the focused session, real reviews."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.errors import InvalidInput, NotFound
from app.flashcards import checks, missed, study
from app.flashcards.models import CardState, Review
from app.labs.models import Submission, SubmissionStatus
from tests.factories import csrf_token, make_submission, make_user, sign_in

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
HX = {"HX-Request": "true"}
VERDICT_CHECKS = [
    {"id": "ring-all-reduce", "passed": False, "score": 0, "message": "rank 1 holds the wrong sum"},
    {"id": "ring-neighbours", "passed": True, "score": 3, "message": "ok"},
    {"id": "communication-volume", "passed": False, "score": 1, "message": "too many bytes"},
]


def failed_ring(session: Session, user_id: int) -> Submission:
    """A graded ring all-reduce submission that fails two checks and passes one."""
    submission = make_submission(session, user_id, "ring-allreduce", score=4, submitted_at=T0, commit=False)
    submission.verdict = {"status": "ok", "message": "graded", "checks": VERDICT_CHECKS, "output": {}}
    session.commit()
    return submission


def test_check_failed_reads_the_verdict() -> None:
    verdict = {"checks": VERDICT_CHECKS}
    assert checks.check_failed(verdict, "ring-all-reduce") is True
    assert checks.check_failed(verdict, "ring-neighbours") is False
    assert checks.check_failed(verdict, "no-builtin-collectives") is False  # not run: nothing failed
    assert checks.check_failed(None, "ring-all-reduce") is False


def test_a_failed_check_flags_its_cards_when_the_verdict_came(session: Session) -> None:
    user = make_user(session, "chk-a")
    submission = failed_ring(session, user.id)
    failed = checks.failed_check(submission.id, "ring-all-reduce", user.id, session=session)
    assert failed.card_ids == ("mdt-003", "mdt-033", "mdt-024") and failed.check_title.startswith("ring_all_reduce")
    assert checks.check_flags(failed) == [(c, T0 + timedelta(seconds=1)) for c in ("mdt-003", "mdt-033", "mdt-024")]
    with pytest.raises(InvalidInput, match="passed the check"):
        checks.failed_check(submission.id, "ring-neighbours", user.id, session=session)
    with pytest.raises(NotFound, match="no check 'nope'"):
        checks.failed_check(submission.id, "nope", user.id, session=session)
    other = make_user(session, "chk-b")
    with pytest.raises(NotFound, match="of yours"):
        checks.failed_check(submission.id, "ring-all-reduce", other.id, session=session)
    queued = make_submission(session, user.id, "ring-allreduce", score=None, submitted_at=T0,
                             status=SubmissionStatus.queued)  # fmt: skip
    with pytest.raises(InvalidInput, match="no graded verdict"):
        checks.failed_check(queued.id, "ring-all-reduce", user.id, session=session)


def test_the_check_session_studies_buries_and_undoes(session: Session) -> None:
    user = make_user(session, "chk-c")
    submission = failed_ring(session, user.id)
    focus = missed.Focus(submission=submission.id, check="ring-all-reduce")
    now = T0 + timedelta(minutes=5)
    view = missed.focus_view(user.id, session=session, now=now, focus=focus)
    assert view.card is not None and view.card.id == "mdt-003" and view.left == 3
    assert view.failed is not None and view.failed.check_id == "ring-all-reduce"
    study.rate(user.id, "mdt-003", 4, session=session, now=now, expected_version=0, fuzz=False)
    study.bury(user.id, "mdt-033", session=session, now=now)
    left = missed.focus_view(user.id, session=session, now=now, focus=focus)
    assert left.card is not None and left.card.id == "mdt-024" and left.left == 1  # rated and buried: gone
    # Undo takes back a review of the session's cards only, not a later one elsewhere.
    study.rate(user.id, "mdt-089", 4, session=session, now=now, fuzz=False)
    assert missed.session_cards(user.id, focus, session=session, now=now) == {"mdt-003", "mdt-033", "mdt-024"}
    cards = missed.session_cards(user.id, focus, session=session, now=now)
    assert study.undo(user.id, session=session, now=now, card_ids=cards) == "mdt-003"
    back = missed.focus_view(user.id, session=session, now=now, focus=focus)
    assert back.card is not None and back.card.id == "mdt-003" and back.left == 2


def test_the_verdict_offers_the_cards_of_each_failed_check(client: TestClient, session: Session) -> None:
    user = make_user(session, "chk-web")
    submission = failed_ring(session, user.id)
    sign_in(client, "chk-web")
    page = client.get(f"/labs/submissions/{submission.id}").text
    link = f'href="/flashcards/missed?submission={submission.id}&amp;check=ring-all-reduce"'
    assert link in page and "Study the cards for this check" in page
    assert 'data-study-check="communication-volume"' in page
    assert 'data-study-check="ring-neighbours"' not in page  # passed
    assert 'data-study-check="no-builtin-collectives"' not in page  # not run

    url = f"/flashcards/missed?submission={submission.id}&check=ring-all-reduce"
    session_page = client.get(url)
    assert session_page.status_code == 200 and "Cards for the check you failed" in session_page.text
    assert 'data-card-id="mdt-003"' in session_page.text and '<b data-count="missed">3</b>' in session_page.text
    assert 'action="/flashcards/missed/undo"' in session_page.text and "data-suspend" in session_page.text

    token = csrf_token(client)
    fields = {"submission": str(submission.id), "check": "ring-all-reduce", "csrf_token": token}
    rated = client.post("/flashcards/missed/rate", data=fields | {"card_id": "mdt-003", "rating": "3", "version": "0"},
                        headers=HX)  # fmt: skip
    assert rated.status_code == 200 and 'data-card-id="mdt-033"' in rated.text
    review = session.scalar(select(Review).where(Review.user_id == user.id, Review.card_id == "mdt-003"))
    assert review is not None and review.raw_rating == 3 and review.deck_id == "mire-dis-train"

    suspended = client.post("/flashcards/missed/suspend", data=fields | {"card_id": "mdt-033"}, headers=HX)
    assert 'data-card-id="mdt-024"' in suspended.text and "Suspended." in suspended.text
    state = session.scalar(select(CardState).where(CardState.user_id == user.id, CardState.card_id == "mdt-033"))
    assert state is not None and state.suspended
    undone = client.post("/flashcards/missed/undo", data=fields, headers=HX)
    assert "Undone" in undone.text and 'data-card-id="mdt-003"' in undone.text
    without_js = client.post("/flashcards/missed/undo", data=fields, follow_redirects=False)
    assert without_js.status_code == 303
    assert without_js.headers["location"] == f"/flashcards/missed?submission={submission.id}&check=ring-all-reduce"

    assert client.get(f"/flashcards/missed?submission={submission.id}&check=ring-neighbours").status_code == 422
    make_user(session, "chk-other")
    sign_in(client, "chk-other")
    assert client.get(url).status_code == 404
