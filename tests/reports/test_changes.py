"""After a report, the content is fixed and synced again: staff see that the item changed, the re-scores the
sync made, and can re-score again; the student follows their report to the corrected score.

A small content tree is written to a temporary folder and synced for real, then edited and synced again.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.accounts.models import Role, User
from app.content.loader import load_tree
from app.content.sync import sync_tree
from app.db import utcnow
from app.exercises import progress
from app.quizzes import attempts
from app.quizzes.models import QuizAttempt
from app.reports.models import ProblemReport
from tests.content.factories import CARD, EXERCISE, QUIZ, write_tree
from tests.factories import csrf_token, make_user, sign_in

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
HX = {"HX-Request": "true"}
PART = """\
parts:
  - id: p1
    prompt: "How many ranks take part?"
    value: 4
    tolerance: 0
    unit: ranks
    explanation: "Every rank of the group."
---
"""


def _tree(root: Path, *, fixed: bool) -> Path:
    """The tiny tree with a part: as first published, or with tq-1 keyed A, p1 valued 5 and the card reworded."""
    exercise = EXERCISE.replace("section: s1\n---\n", "section: s1\n" + PART)
    quiz, card = QUIZ, CARD
    if fixed:
        quiz = QUIZ.replace("    answer: B\n", "    answer: A\n", 1)
        exercise = exercise.replace("value: 4", "value: 5")
        card = CARD.replace("Sums across ranks.", "Sums across all ranks.")
    files = {"quizzes/tiny-quiz.yaml": quiz, "exercises/tiny-set/01.md": exercise, "decks/tiny-deck/cards/001.md": card}
    return write_tree(root, **files)


def _report(client: TestClient, kind: str, item: str, attempt: int | None = None) -> None:
    data = {
        "kind": kind,
        "item": item,
        "text": f"I think this {kind} is wrong.",
        **({"attempt": str(attempt)} if attempt else {}),
    }
    sent = client.post("/reports", data=data, headers={**HX, "X-CSRF-Token": csrf_token(client)})
    assert sent.status_code == 201, sent.text


@pytest.fixture
def reported(client: TestClient, session: Session, tmp_path: Path) -> tuple[User, QuizAttempt]:
    """ada sat tiny-quiz (tq-1: A, marked wrong; tq-2 right), answered p1 with 5 (wrong), and reported tq-1, p1 and
    the card; then the content was fixed and synced again. Returns (prof, her attempt)."""
    root = _tree(tmp_path / "content", fixed=False)
    sync_tree(load_tree(root), session=session, now=T0)
    ada, prof = make_user(session, "ada"), make_user(session, "prof", role=Role.admin)
    attempt, _ = attempts.start_attempt("tiny-quiz", ada.id, session=session, now=T0)
    for question, choice in (("tq-1", "A"), ("tq-2", "A")):
        attempts.save_answer(attempt.id, ada.id, question, choice, session=session, now=T0)
    attempts.submit(attempt.id, ada.id, session=session, now=T0)
    assert progress.answer_part("ex-t-1", "p1", ada.id, "5", session=session, now=T0).correct is False
    session.commit()
    assert attempt.score == 1

    sign_in(client, "ada")
    _report(client, "question", "tq-1", attempt.id)
    _report(client, "part", "ex-t-1/p1")
    _report(client, "card", "tc-001")
    report = sync_tree(load_tree(_tree(root, fixed=True)), session=session, now=utcnow())
    session.commit()
    assert report.rescored == {"quiz attempt": 1, "exercise part": 1}
    client.post("/signout", data={"csrf_token": csrf_token(client)})
    return prof, attempt


def _reports(session: Session) -> dict[str, ProblemReport]:
    session.expire_all()
    return {x.item_kind: x for x in session.scalars(select(ProblemReport))}


def test_staff_see_the_change_and_the_rescores_the_sync_made(
    client: TestClient, session: Session, reported: tuple[User, QuizAttempt]
) -> None:
    prof, attempt = reported
    rows = _reports(session)
    sign_in(client, "prof")

    question = client.get(f"/instructor/reports/{rows['question'].id}").text
    assert "<strong>The content changed</strong>" in question and "<strong>its key changed</strong>" in question
    assert "1 submitted attempt of 1 student re-marked against the corrected key" in question
    assert f'href="/instructor/attempts/{attempt.id}"' in question

    part = client.get(f"/instructor/reports/{rows['part'].id}").text
    assert "<strong>its accepted answer changed</strong>" in part
    assert "1 student&#39;s part re-marked (1 answer changed verdict; 1 student)" in part

    card = client.get(f"/instructor/reports/{rows['card'].id}").text
    assert "<strong>The content changed</strong>" in card
    assert "key changed" not in card and "Re-score now" not in card

    # The sync re-scored already: a second re-scoring finds nothing left, and says who asked and when.
    done = client.post(
        f"/instructor/reports/{rows['question'].id}/rescore", data={"csrf_token": csrf_token(client)},
        follow_redirects=False,
    )  # fmt: skip
    assert done.status_code == 303
    page = client.get(done.headers["location"]).text
    assert "Re-scored now by prof" in page and "0 attempts changed (the sync had done it already)" in page
    row = _reports(session)["question"]
    assert (row.rescored_by, row.rescored_count) == (prof.id, 0) and row.rescored_at is not None


def test_re_score_now_marks_what_the_sync_missed_once(
    client: TestClient, session: Session, reported: tuple[User, QuizAttempt]
) -> None:
    _, attempt = reported
    # An attempt still marked against the old key (restored from a backup taken before the fix, say).
    session.refresh(attempt)
    assert attempt.result is not None
    marks = [
        {**m, "answer": "B", "correct": m["choice"] == "B"} if m["id"] == "tq-1" else m for m in attempt.result["marks"]
    ]
    attempt.result = {**attempt.result, "marks": marks, "score": 1}
    attempt.score = 1
    session.commit()
    report = _reports(session)["question"]
    sign_in(client, "prof")
    token = csrf_token(client)
    client.post(f"/instructor/reports/{report.id}/rescore", data={"csrf_token": token})
    session.refresh(attempt)
    assert (attempt.score, _reports(session)["question"].rescored_count) == (2, 1)
    client.post(f"/instructor/reports/{report.id}/rescore", data={"csrf_token": token})
    session.refresh(attempt)
    assert (attempt.score, _reports(session)["question"].rescored_count) == (2, 0)


def test_the_student_follows_the_report_to_the_corrected_score(
    client: TestClient, session: Session, reported: tuple[User, QuizAttempt]
) -> None:
    _, attempt = reported
    rows = _reports(session)
    sign_in(client, "ada")
    mine = client.get(f"/reports/{rows['question'].id}").text
    link = f"/quizzes/attempts/{attempt.id}/result#rescored-heading"
    assert "Your score on this was corrected" in mine and f'href="{link}"' in mine
    result = client.get(link.split("#")[0]).text
    assert 'id="rescored-heading"' in result and "Score 1/2 → <strong>2/2</strong>." in result

    part = client.get(f"/reports/{rows['part'].id}").text
    assert 'href="/exercises/tiny-set/ex-t-1#part-p1"' in part
    assert "Your score on this was corrected" not in client.get(f"/reports/{rows['card'].id}").text
