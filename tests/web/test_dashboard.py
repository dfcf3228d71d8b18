"""The dashboard says what to do next: the attempt to resume, cards to study, labs to pass, recent results."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.content.records import Question
from app.db import utcnow
from app.flashcards import preferences
from app.labs.models import Submission, SubmissionStatus
from app.quizzes import attempts
from tests.conftest import LAB_COUNT as LABS
from tests.factories import api_token, csrf_token, make_user, sign_in

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture
def key(session: Session) -> dict[str, str]:
    return dict(session.execute(select(Question.id, Question.answer)).all())


def older(session: Session, user: User, days: int = 2) -> None:
    session.execute(update(User).where(User.id == user.id).values(created_at=utcnow() - timedelta(days=days)))
    session.commit()


def test_resume_number_is_the_first_unanswered_question() -> None:
    assert attempts.resume_number(["a", "b", "c"], {"a"}) == 2
    assert attempts.resume_number(["a", "b", "c"], {"a", "c"}) == 2
    assert attempts.resume_number(["a", "b", "c"], {"a", "b", "c"}) == 3
    assert attempts.resume_number(["a", "b", "c"], set()) == 1


def test_a_new_student_is_welcomed_not_welcomed_back(client: TestClient) -> None:
    form = {"username": "fresh", "password": "long-enough-pw", "csrf_token": csrf_token(client)}
    assert client.post("/signup", data=form, follow_redirects=False).status_code == 303
    page = client.get("/").text
    assert "Welcome, fresh" in page and "Welcome back" not in page
    assert '<span class="big-number" data-cards-due>20</span> cards to study today' in page
    assert 'href="/flashcards/mire-dis-train/study"' in page
    # One lab, the first on the path, and why: not every lab in id order.
    labs = page.split('id="todo-labs"')[1].split("</section>")[0]
    assert labs.count("data-lab=") == 1 and 'data-lab="memory-estimate"' in labs
    assert "It builds on no other lab: a good place to start." in labs and f"0 of {LABS}</span> labs done" in labs
    assert "Quiz in progress" not in page and "will show here" in page


def test_a_returning_student_is_welcomed_back(client: TestClient, session: Session) -> None:
    user = make_user(session, "back-again")
    older(session, user)
    sign_in(client, "back-again")
    assert "Welcome back, back-again" in client.get("/").text


def test_signing_in_again_makes_a_new_account_returning(client: TestClient, session: Session) -> None:
    make_user(session, "same-day")
    sign_in(client, "same-day")
    assert "Welcome, same-day" in client.get("/").text  # the session made with the account, a minute old at most
    with session.begin_nested():
        earlier = utcnow() - timedelta(minutes=30)
        session.execute(update(User).where(User.username == "same-day").values(created_at=earlier))
    sign_in(client, "same-day")
    assert "Welcome back, same-day" in client.get("/").text


def test_an_attempt_in_progress_resumes_at_its_first_unanswered_question(
    client: TestClient, session: Session, key: dict[str, str]
) -> None:
    make_user(session, "resumer")
    headers = api_token(client, "resumer")
    started = client.post("/api/v1/quizzes/module-202/attempts", headers=headers).json()
    order = [q["id"] for q in started["questions"]]
    for qid in (order[0], order[1], order[3]):
        url = f"/api/v1/attempts/{started['id']}/answers/{qid}"
        assert client.put(url, json={"choice": key[qid]}, headers=headers).status_code == 200
    sign_in(client, "resumer")
    page = client.get("/").text
    link = f'href="/quizzes/attempts/{started["id"]}?q=3"'
    assert link in page and "Resume Module 202 Quiz: Distributed Training at Scale at question 3" in page
    assert "3 of 25 answered" in page
    left = re.search(r"<strong data-time-left>(\d+):(\d\d)</strong> left", page)
    assert left and 58 <= int(left.group(1)) <= 59
    # The attempt's own URL without a question number opens the same question.
    assert "Question 3 of 25" in client.get(f"/quizzes/attempts/{started['id']}").text


def test_results_missed_cards_and_labs(client: TestClient, session: Session, key: dict[str, str]) -> None:
    user = make_user(session, "results")
    older(session, user)
    preferences.set_time_zone(user.id, "Asia/Tokyo", session=session)
    attempt, _ = attempts.start_attempt("ch35-quiz", user.id, session=session, now=T0)
    for qid in attempt.question_ids:
        choice = key[qid] if qid != "ch35-q01" else next(k for k in "ABCD" if k != key[qid])
        attempts.save_answer(attempt.id, user.id, qid, choice, session=session, now=T0)
    attempts.submit(attempt.id, user.id, session=session, now=T0 + timedelta(minutes=5))
    base = {"user_id": user.id, "code": "pass", "status": SubmissionStatus.graded}
    session.add_all([
        Submission(**base, lab_id="ring-allreduce", score=4, max_score=10, submitted_at=T0),
        Submission(**base, lab_id="collectives-p2p", score=12, max_score=12, submitted_at=T0 + timedelta(hours=1)),
    ])  # fmt: skip
    session.commit()
    sign_in(client, "results")
    page = client.get("/").text
    quizzes = page.split('data-results="quizzes"')[1].split("</ul>")[0]
    assert f'href="/quizzes/attempts/{attempt.id}/result"' in quizzes and "<strong>14/15</strong>" in quizzes
    assert '<time datetime="2026-03-02T09:05:00+00:00">02 Mar 2026, 18:05 JST</time>' in quizzes
    labs = page.split('data-results="labs"')[1].split("</ul>")[0]
    assert "<strong>4/10</strong>" in labs and "<strong>12/12</strong>" in labs
    assert labs.index("Collectives from point-to-point") < labs.index("Ring all-reduce")  # newest first
    next_lab = page.split('id="todo-labs"')[1].split("</section>")[0]
    assert 'data-lab="memory-estimate"' in next_lab and f"1 of {LABS}</span> labs done" in next_lab  # p2p: full marks
    assert "<span data-missed-cards>2</span> cards teach questions you missed" in page
    assert 'href="/flashcards/missed"' in page


def test_recent_results_list_solved_exercise_parts(client: TestClient, session: Session) -> None:
    from app.exercises import progress

    user = make_user(session, "solver")
    sign_in(client, "solver")
    assert 'data-results="exercises"' not in client.get("/").text
    progress.answer_part("ex-26-1", "a-global-batch", user.id, "2048", session=session, now=utcnow())
    session.commit()
    page = client.get("/").text
    assert 'data-results="exercises"' in page
    assert 'href="/exercises/ch26-exercises/ex-26-1">Exercise 26.1</a>, part a-global-batch solved' in page


def next_lab(client: TestClient) -> str:
    """The dashboard's next-lab section, its tags stripped and its spaces collapsed."""
    section = client.get("/").text.split('id="todo-labs"')[1].split("</section>")[0]
    return " ".join(re.sub(r"<[^>]+>", " ", section.split(">", 1)[1]).split())


def test_the_suggested_lab_moves_on_once_it_is_passed(client: TestClient, session: Session) -> None:
    from app.labs import catalog, queue
    from tests.labs_app.waiting import ATTEMPTS, LEASE, worker

    make_user(session, "pathwalker")
    sign_in(client, "pathwalker")
    assert next_lab(client) == (
        "Next lab Estimate training memory: parameters, AdamW state, activations It builds on no other lab: a good"
        f" place to start. 0 of {LABS} labs done · See the whole path"
    )
    submitted = client.post(
        "/labs/memory-estimate/submissions", data={"code": "x = 1\n", "csrf_token": csrf_token(client)},
        follow_redirects=False,
    )  # fmt: skip
    assert submitted.status_code == 303
    being_graded = f"A submission to it is being graded. 0 of {LABS} labs done · See the whole path"
    assert next_lab(client).endswith(being_graded)

    cap = worker(session, "path-grader", utcnow())
    job = queue.claim(cap, session=session, now=utcnow(), lease_s=LEASE, max_attempts=ATTEMPTS)
    assert job is not None and job.lab_id == "memory-estimate"
    full = catalog.get_lab(session, "memory-estimate").spec.max_score
    verdict = {"status": "passed", "score": full, "max_score": full, "message": "all checks passed", "checks": []}
    queue.finish(job, cap.worker_id, verdict, session=session, now=utcnow(), max_attempts=ATTEMPTS)
    session.commit()
    assert next_lab(client) == (
        "Next lab Tiled attention with the online softmax You have done the labs it builds on: Estimate training"
        f" memory: parameters, AdamW state, activations. 1 of {LABS} labs done · See the whole path"
    )
