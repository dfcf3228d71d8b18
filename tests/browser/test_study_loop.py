"""The study loop in a real Chromium: miss quiz questions, study the cards that teach them, come back to the dashboard.

Also: a new account takes the browser's time zone, a quiz in progress resumes at its first
unanswered question, and the API docs page renders its operations under the CSP.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from app.content.loader import load_tree
from tests.conftest import CONTENT_DIR

pytestmark = pytest.mark.browser
_names = itertools.count(1)
MISS = {"ch35-q01": ("mdt-028", "mdt-040"), "ch35-q02": ("mdt-024", "mdt-046")}


@pytest.fixture(scope="module")
def ch35() -> dict[str, str]:
    quiz = next(q for q in load_tree(CONTENT_DIR).quizzes if q.id == "ch35-quiz")
    return {q.id: q.answer for q in quiz.questions}


@pytest.fixture
def tokyo(browser: Browser, server: str) -> Iterator[Page]:
    """A page in a browser whose clock says Asia/Tokyo."""
    context = browser.new_context(base_url=server, timezone_id="Asia/Tokyo")
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()
    assert not errors, errors


def sign_up(page: Page) -> str:
    name = f"looper{next(_names)}"
    page.goto("/signup")
    expect(page.get_by_label("Time zone")).to_have_value("Asia/Tokyo")  # preselected from the browser (Intl)
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill("a-good-password")
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_role("heading", name=f"Welcome, {name}")).to_be_visible()
    return name


def test_miss_questions_study_their_cards_and_see_it_on_the_dashboard(tokyo: Page, ch35: dict[str, str]) -> None:
    page = tokyo
    sign_up(page)
    page.goto("/quizzes/ch35-quiz")
    page.get_by_role("button", name="Start the quiz").click()
    for n in range(1, 16):
        expect(page.get_by_text(re.compile(rf"^Question {n} of 15"))).to_be_visible()
        qid = page.locator("form.answer-form").get_attribute("data-question-id")
        assert qid is not None
        choice = ch35[qid] if qid not in MISS else next(k for k in "ABCD" if k != ch35[qid])
        page.locator(f"form.answer-form input[value='{choice}']").check()
        expect(page.get_by_text(f"{n} of 15 answered")).to_be_visible()
        page.get_by_role("button", name="Next →" if n < 15 else "Review and submit →").click()
    page.get_by_role("button", name="Submit attempt").click()
    expect(page.get_by_test_id("score")).to_have_text("13/15")
    expect(page.get_by_text(re.compile(r"submitted .* JST"))).to_be_visible()  # the student's zone, not UTC

    # Under each missed question, the cards that teach it.
    for qid, cards in MISS.items():
        review = page.locator(f'article.review[data-question="{qid}"]')
        for card in cards:
            expect(review.locator(f'[data-card="{card}"]')).to_be_visible()
    expect(page.locator("article.review.right [data-card]")).to_have_count(0)

    page.get_by_role("button", name="Study these 4 cards now").click()
    page.wait_for_load_state("load")  # the study keys are live once the page's scripts have run
    reviewer = page.locator("#reviewer")
    left = reviewer.locator('[data-count="missed"]')
    expect(left).to_have_text("4")
    seen = []
    for n, digit in enumerate(["1", "4", "3", "4"], start=1):
        card = reviewer.locator(".study-card")
        if n > 1:
            expect(card).to_be_focused()  # focus follows the swap to the next card, which takes the keys
        seen.append(card.get_attribute("data-card-id"))
        page.keyboard.press("Space")
        expect(reviewer.locator(".answer")).to_be_visible()
        page.keyboard.press(digit)
        expect(left).to_have_text(str(4 - n))
    assert seen == ["mdt-028", "mdt-040", "mdt-024", "mdt-046"]
    expect(reviewer.get_by_text("You have studied every card for the questions you missed")).to_be_visible()

    # Back to the normal queue: the card rated Again is in learning there, rated by the same scheduler.
    reviewer.get_by_role("button", name="Back to the normal queue").click()
    expect(page).to_have_url(re.compile(r"/flashcards/mire-dis-train/study$"))
    expect(page.locator('#reviewer [data-count="learning"]')).not_to_have_text("0")

    page.goto("/")
    quizzes = page.locator('[data-results="quizzes"]')
    expect(quizzes).to_contain_text("13/15")
    expect(quizzes.locator("time")).to_contain_text("JST")
    expect(page.locator("[data-missed-cards]")).to_have_count(0)  # all four studied


def test_a_quiz_in_progress_resumes_at_its_first_unanswered_question(tokyo: Page) -> None:
    page = tokyo
    sign_up(page)
    page.goto("/quizzes/module-202")
    page.get_by_role("button", name="Start the quiz").click()
    for n in (1, 2):
        expect(page.get_by_text(re.compile(rf"^Question {n} of 25"))).to_be_visible()
        page.locator("form.answer-form input[type=radio]").first.check()
        expect(page.locator(".saved-status")).to_have_text("Saved.")
        page.get_by_role("button", name="Next →").click()
    page.goto("/")
    resume = page.get_by_role("button", name=re.compile(r"Resume Module 202 .* at question 3"))
    expect(page.locator("[data-time-left]")).to_have_text(re.compile(r"^(60:00|59:\d\d)$"))
    resume.click()
    expect(page.get_by_text(re.compile(r"^Question 3 of 25"))).to_be_visible()
    page.goto(page.url.split("?")[0])  # the attempt's own address resumes there too
    expect(page.get_by_text(re.compile(r"^Question 3 of 25"))).to_be_visible()


def test_api_docs_render_the_operations(page: Page) -> None:
    page.goto("/api/docs")
    operations = page.locator(".opblock")
    expect(operations.first).to_be_visible(timeout=15_000)
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/quizzes/{quiz_id}/attempts")).to_be_visible()
    expect(page.locator(".opblock-summary-path", has_text="/api/v1/reviews").first).to_be_visible()
    assert operations.count() > 20
