"""Students report problems from under an item and read the answers; staff answer, close, and count them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import Role, User
from app.content import records as r
from app.reports import rules
from app.reports.models import ProblemReport
from tests.factories import csrf_token, make_attempt, make_user, sign_in

HX = {"HX-Request": "true"}
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
Q = "m202-q23"
PART = ("ex-26-9", "b-ridge-dimension")  # value 468: never to be shown on a report page


def send(
    client: TestClient, kind: str, item: str, text: str, *, attempt: int | None = None, htmx: bool = True
) -> Response:
    data = {"kind": kind, "item": item, "text": text, **({"attempt": str(attempt)} if attempt else {})}
    if htmx:
        return client.post("/reports", data=data, headers={**HX, "X-CSRF-Token": csrf_token(client)})
    return client.post("/reports", data={**data, "csrf_token": csrf_token(client)}, follow_redirects=False)


def only_report(session: Session) -> ProblemReport:
    session.expire_all()
    return session.scalars(select(ProblemReport)).one()


@pytest.fixture
def ada(session: Session, client: TestClient) -> User:
    user = make_user(session, "ada")
    sign_in(client, "ada")
    return user


def _attempt(session: Session, user: User) -> int:
    return make_attempt(
        session, user.id, "module-202", right=3, started_at=T0, submitted_at=T0 + timedelta(minutes=20)
    ).id


def test_a_question_is_reported_from_the_attempt_with_the_version_it_had(
    client: TestClient, session: Session, ada: User
) -> None:
    attempt = _attempt(session, ada)
    result = client.get(f"/quizzes/attempts/{attempt}/result").text
    assert result.count("<summary>Report a problem") == 25
    assert f'<input type="hidden" name="attempt" value="{attempt}">' in result

    sent = send(client, "question", Q, "  The key says D, but the source's own working gives C.  ", attempt=attempt)

    assert sent.status_code == 201
    assert "Thank you: your report on this question was sent to the course staff." in sent.text
    assert 'data-autofocus data-announce="Thank you' in sent.text
    report = only_report(session)
    question = session.get(r.Question, Q)
    assert question is not None
    snap = rules.question_snapshot(question.source, question.answer, question.quiz.version)
    assert (report.user_id, report.item_kind, report.item_id, report.attempt_id, report.state) == (
        ada.id, "question", Q, attempt, "open"
    )  # fmt: skip
    assert (report.content_version, report.content_digest, report.key_digest) == (
        question.quiz.version, snap.digest, snap.key_digest
    )  # fmt: skip
    assert report.text == "The key says D, but the source's own working gives C."
    assert f'href="/reports/{report.id}"' in sent.text


def test_an_attempt_page_has_the_control_for_the_question_shown(
    client: TestClient, session: Session, ada: User
) -> None:
    attempt = make_attempt(session, ada.id, "module-202", right=0, started_at=datetime.now(UTC))
    page = client.get(f"/quizzes/attempts/{attempt.id}?q=2").text
    assert page.count("<summary>Report a problem") == 1
    second = attempt.question_ids[1]
    assert f'<input type="hidden" name="item" value="{second}">' in page


def test_a_question_is_reported_only_from_the_students_own_attempt(
    client: TestClient, session: Session, ada: User
) -> None:
    bob = make_user(session, "bob")
    theirs = _attempt(session, bob)
    for attempt in (theirs, None):
        sent = send(client, "question", Q, "The key looks wrong to me.", attempt=attempt)
        assert sent.status_code == 404
        assert "That question is not in a quiz attempt of yours" in sent.text
    assert session.scalars(select(ProblemReport)).all() == []


def test_parts_cards_and_labs_are_reported_with_their_versions(client: TestClient, session: Session, ada: User) -> None:
    card = session.scalars(select(r.Card).where(r.Card.retired_at.is_(None)).order_by(r.Card.id)).first()
    lab = session.get(r.Lab, "ring-allreduce")
    assert card is not None and lab is not None
    assert "<summary>Report a problem" in client.get(f"/flashcards/{card.deck_id}/cards/{card.id}").text
    assert "<summary>Report a problem" in client.get("/labs/ring-allreduce").text
    study = client.get(f"/flashcards/{card.deck_id}/study").text
    reviewer = study[study.index('id="reviewer"') :]
    assert '<input type="hidden" name="kind" value="card">' in reviewer  # swapped with each card
    exercise_page = client.get("/exercises/ch26-exercises/ex-26-9").text
    assert f'<input type="hidden" name="item" value="{PART[0]}/{PART[1]}">' in exercise_page

    for kind, item in (("part", "/".join(PART)), ("card", card.id), ("lab", "ring-allreduce")):
        sent = send(client, kind, item, f"Something is off with this {kind}.", htmx=False)
        assert sent.status_code == 303 and sent.headers["location"].startswith("/reports/")
    rows = {x.item_kind: x for x in session.scalars(select(ProblemReport))}
    assert rows["lab"].content_version == f"version {lab.version}"
    assert rows["card"].content_digest == rules.card_snapshot(card.source).digest
    assert rows["card"].key_digest is None
    exercise = session.get(r.Exercise, PART[0])
    assert exercise is not None
    part = next(p for p in exercise.parts if p["id"] == PART[1])
    assert (rows["part"].content_digest, rows["part"].key_digest) == (
        rules.part_snapshot(part).digest, rules.part_snapshot(part).key_digest
    )  # fmt: skip


def test_unknown_items_and_kinds_are_refused_with_a_reason(client: TestClient, ada: User) -> None:
    assert send(client, "card", "no-such-card", "This card is wrong.").status_code == 404
    assert send(client, "part", "ex-26-9/no-such-part", "This part is wrong.").status_code == 404
    wrong = send(client, "quiz", "module-202", "The whole quiz is wrong.")
    assert wrong.status_code == 422 and "Reports are about a question, part, card or lab" in wrong.text


def test_the_report_pages_never_show_a_parts_accepted_value(client: TestClient, session: Session, ada: User) -> None:
    sent = send(client, "part", "/".join(PART), "I think the ridge point is off by one.")
    report = only_report(session)
    pages = [sent.text, client.get("/reports").text, client.get(f"/reports/{report.id}").text]
    for page in pages:
        assert "468" not in page and "FLOP/byte; $d/3" not in page and "d/3" not in page
    assert "I think the ridge point is off by one." in pages[1]


def test_text_must_be_10_to_4000_characters(client: TestClient, session: Session, ada: User) -> None:
    short = send(client, "lab", "ring-allreduce", "Broken.  ")
    assert short.status_code == 422
    assert "at least 10 characters (you wrote 7)" in short.text
    assert 'aria-invalid="true" data-autofocus' in short.text and "Broken." in short.text  # the text is kept
    long = send(client, "lab", "ring-allreduce", "x" * 4001)
    assert long.status_code == 422 and "at most 4000 characters; yours has 4001" in long.text
    no_js = send(client, "lab", "ring-allreduce", "short", htmx=False)
    assert no_js.status_code == 422 and "at least 10 characters" in no_js.text
    assert session.scalars(select(ProblemReport)).all() == []


def test_five_open_reports_an_hour_then_429_until_one_is_answered(
    client: TestClient, session: Session, ada: User
) -> None:
    for n in range(5):
        assert send(client, "lab", "ring-allreduce", f"Problem number {n} with this lab.").status_code == 201
    sixth = send(client, "lab", "ring-allreduce", "Problem number 5 with this lab.")
    assert sixth.status_code == 429
    assert int(sixth.headers["Retry-After"]) > 3500
    assert "You have 5 reports from the last hour waiting for an answer" in sixth.text
    first = session.scalars(select(ProblemReport).order_by(ProblemReport.id)).first()
    assert first is not None
    first.state = "answered"
    session.commit()
    assert send(client, "lab", "ring-allreduce", "Problem number 5 with this lab.").status_code == 201


def test_a_student_sees_only_their_own_reports(client: TestClient, session: Session, ada: User) -> None:
    make_user(session, "bob")
    send(client, "lab", "ring-allreduce", "Ada's problem with the lab.")
    mine = only_report(session)
    assert client.get(f"/reports/{mine.id}").status_code == 200
    client.post("/signout", data={"csrf_token": csrf_token(client)})
    sign_in(client, "bob")
    other = client.get(f"/reports/{mine.id}")
    assert other.status_code == 404 and "Ada's problem" not in other.text
    assert "Ada's problem" not in client.get("/reports").text
    assert client.get("/instructor/reports").status_code == 403
    assert client.get(f"/instructor/reports/{mine.id}").status_code == 403
    answer = {"answer": "Not yours to answer.", "csrf_token": csrf_token(client)}
    assert client.post(f"/instructor/reports/{mine.id}/answer", data=answer).status_code == 403


def test_staff_answer_and_close_and_the_home_counts_open_reports(
    client: TestClient, session: Session, ada: User
) -> None:
    make_user(session, "prof", role=Role.admin)
    send(client, "lab", "ring-allreduce", "The statement says 4 ranks, the tests use 2.")
    send(client, "lab", "ring-allreduce", "The statement says 4 ranks, the tests use 2 (again).")
    first, second = session.scalars(select(ProblemReport).order_by(ProblemReport.id)).all()
    client.post("/signout", data={"csrf_token": csrf_token(client)})
    sign_in(client, "prof")

    home = client.get("/instructor").text
    assert '<span data-figure="open-reports">2</span> open' in home and 'href="/instructor/reports"' in home
    listing = client.get("/instructor/reports").text
    assert listing.count('class="report report-open"') == 2
    assert "The statement says 4 ranks, the tests use 2." in listing and ">ada</a>" in listing
    assert 'href="/labs/ring-allreduce"' in listing and "Unchanged" in listing

    token = csrf_token(client)
    empty = client.post(f"/instructor/reports/{first.id}/answer", data={"answer": " ", "csrf_token": token})
    assert empty.status_code == 422 and "Write an answer for the student" in empty.text
    done = client.post(
        f"/instructor/reports/{first.id}/answer",
        data={"answer": "Thank you: the statement now says 2 ranks.", "action": "answer", "csrf_token": token},
        follow_redirects=False,
    )  # fmt: skip
    assert done.status_code == 303 and done.headers["location"] == f"/instructor/reports/{first.id}?done=answered"
    closed = client.post(
        f"/instructor/reports/{second.id}/answer", data={"action": "close", "csrf_token": token}, follow_redirects=False
    )
    assert closed.status_code == 303
    again = client.post(f"/instructor/reports/{first.id}/answer", data={"action": "close", "csrf_token": token})
    assert again.status_code == 409

    session.expire_all()
    assert (first.state, first.answer, second.state, second.answer) == (
        "answered", "Thank you: the statement now says 2 ranks.", "closed", None
    )  # fmt: skip
    assert first.answered_at is not None and first.answered_by == second.answered_by
    assert '<span data-figure="open-reports">0</span> open' in client.get("/instructor").text
    assert "No report is waiting for an answer." in client.get("/instructor/reports").text
    assert client.get("/instructor/reports?state=all").text.count('class="report report-') == 2

    client.post("/signout", data={"csrf_token": token})
    sign_in(client, "ada")
    mine = client.get("/reports").text
    assert "Thank you: the statement now says 2 ranks." in mine and "prof answered" in mine
    assert "without a written answer" in mine
    assert "Answered" in client.get(f"/reports/{first.id}").text
