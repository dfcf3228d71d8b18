"""Learning from failures in a real Chromium: a failed lab check leads to its flashcards (one review), a
missed quiz question no card covers becomes the student's own card, found in their queue, and undo works
in the missed-questions session with the normal study keys.

The lab submission and the quiz attempt are written into the server's database the way the tests'
factories make them (a graded verdict as a worker leaves it; an attempt submitted through the service).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.accounts.models import User
from app.content.loader import load_tree
from app.db import make_engine, make_sessionmaker, utcnow
from app.flashcards.models import Review
from tests.browser.conftest import serve, sign_up
from tests.conftest import CONTENT_DIR
from tests.factories import make_submission
from tests.flashcards.test_missed import take_ch35

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(base URL, data folder) of a server that grades nothing by itself."""
    data = tmp_path_factory.mktemp("failure-cards-data")
    with serve(data, RINGLAB_EMBEDDED_WORKER="false") as base:
        yield base, data


@pytest.fixture
def db(site: tuple[str, Path]) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(f"sqlite:///{site[1] / 'ringlab.sqlite3'}")
    yield make_sessionmaker(engine)
    engine.dispose()


@pytest.fixture
def page(browser: Browser, site: tuple[str, Path]) -> Iterator[Page]:
    context = browser.new_context(base_url=site[0])
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()
    assert not errors, errors


def test_fail_a_check_study_its_cards_make_a_card_and_undo(page: Page, db: sessionmaker[Session]) -> None:
    name = sign_up(page, "failing")
    quiz = next(q for q in load_tree(CONTENT_DIR).quizzes if q.id == "ch35-quiz")
    key = {q.id: q.answer for q in quiz.questions}
    with db() as session:
        user_id = session.scalars(select(User.id).where(User.username == name)).one()
        # Graded a moment ago: its verdict (finished_at, a second after submitted_at) came in before any review
        # below, as it does for a student, however fast this machine runs the journey.
        submitted = utcnow() - timedelta(seconds=10)
        submission = make_submission(session, user_id, "ring-allreduce", score=6, submitted_at=submitted, commit=False)
        checks = [{"id": "ring-all-reduce", "passed": False, "score": 0, "message": "rank 1 holds the wrong sum"}]
        submission.verdict = {"status": "ok", "message": "graded", "checks": checks, "output": {}}
        session.commit()
        submission_id = submission.id
        attempt_id = take_ch35(session, user_id, key, now=utcnow() - timedelta(minutes=10))

    # A failed check offers its cards; one review there is an ordinary FSRS review.
    page.goto(f"/labs/submissions/{submission_id}")
    page.get_by_role("link", name=re.compile("Study the cards for this check")).click()
    expect(page.get_by_role("heading", name="Cards for the check you failed")).to_be_visible()
    reviewer = page.locator("#reviewer")
    left = reviewer.locator('[data-count="missed"]')
    expect(left).to_have_text("3")
    page.keyboard.press("Space")
    expect(reviewer.locator(".answer")).to_be_visible()
    page.keyboard.press("4")
    expect(left).to_have_text("2")
    with db() as session:
        rated = session.scalars(select(Review.card_id).where(Review.user_id == user_id)).all()
    assert rated == ["mdt-003"]

    # A missed question no deck card covers: make a card of it, then find it in the queue.
    page.goto(f"/quizzes/attempts/{attempt_id}/result")
    nccl = page.locator('article.review[data-question="ch35-q11"]')
    nccl.get_by_role("button", name=re.compile("Make a card from this question")).click()
    made = nccl.get_by_role("status")
    expect(made).to_contain_text("Card made.")
    expect(made).to_be_focused()
    page.goto("/flashcards/mine/study")
    expect(page.locator("#reviewer .study-card")).to_contain_text("GPU-to-GPU")

    # Undo in the missed-questions session, with its key, as in the normal queue.
    page.goto(f"/flashcards/missed?attempt={attempt_id}")
    left = page.locator('#reviewer [data-count="missed"]')
    expect(left).to_have_text("2")
    first = page.locator("#reviewer .study-card").get_attribute("data-card-id")
    page.keyboard.press("Space")
    page.keyboard.press("3")
    expect(left).to_have_text("1")
    page.keyboard.press("u")
    expect(left).to_have_text("2")
    expect(page.locator("#reviewer .study-card")).to_have_attribute("data-card-id", first or "")
    expect(page.locator("#reviewer .notice")).to_have_text("Undone: the card is back as it was.")
