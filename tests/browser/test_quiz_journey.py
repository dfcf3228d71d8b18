"""Take Module 202 in a real Chromium: all right for the top tier, then 19 right for a fail."""

from __future__ import annotations

import itertools
import re

import pytest
from playwright.sync_api import Page, expect

from app.content.loader import load_tree
from tests.conftest import CONTENT_DIR

pytestmark = pytest.mark.browser
_names = itertools.count(1)


@pytest.fixture(scope="module")
def module_202() -> dict[str, tuple[str, list[str]]]:
    """Question id -> (right option, all options), from the content files."""
    quiz = next(q for q in load_tree(CONTENT_DIR).quizzes if q.id == "module-202")
    return {q.id: (q.answer, [o.key for o in q.options]) for q in quiz.questions}


def sign_up(page: Page) -> None:
    page.goto("/signup")
    page.get_by_label("Username").fill(f"quizzer{next(_names)}")
    page.get_by_label("Password").fill("a-good-password")
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_role("heading", name=re.compile("Welcome, quizzer"))).to_be_visible()


def answer_all(page: Page, key: dict[str, tuple[str, list[str]]], right: int) -> None:
    """Answer the 25 questions in order, the first ``right`` of them correctly."""
    overview = page.get_by_role("navigation", name="Questions")
    for n in range(1, 26):
        expect(page.get_by_text(re.compile(rf"^Question {n} of 25"))).to_be_visible()
        qid = page.locator("form.answer-form").get_attribute("data-question-id")
        assert qid is not None
        answer, options = key[qid]
        choice = answer if n <= right else next(k for k in options if k != answer)
        page.locator(f"form.answer-form input[value='{choice}']").check()
        expect(overview.get_by_text(f"{n} of 25 answered")).to_be_visible()
        if n == 12:
            # A reload resumes with nothing lost.
            page.reload()
            expect(page.locator(f"form.answer-form input[value='{choice}']")).to_be_checked()
            expect(overview.get_by_text("12 of 25 answered")).to_be_visible()
        if n < 25:
            page.get_by_role("button", name="Next →").click()
    page.get_by_role("button", name="Review and submit →").click()
    expect(page.get_by_text("All 25 questions are answered.")).to_be_visible()
    page.get_by_role("button", name="Submit attempt").click()
    expect(page.get_by_role("heading", name="Your result")).to_be_visible()


def test_take_module_202_twice(page: Page, module_202: dict[str, tuple[str, list[str]]]) -> None:
    sign_up(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Quizzes").click()
    page.get_by_role("link", name="Module 202 Quiz: Distributed Training at Scale").click()
    page.get_by_role("button", name="Start the quiz").click()
    timer = page.get_by_role("timer")
    expect(timer).to_contain_text(re.compile(r"(60:00|59:\d\d)"))
    first = timer.inner_text()
    page.wait_for_timeout(1300)
    assert timer.inner_text() != first, "the countdown should tick"

    # The overview jumps anywhere, unanswered questions show as such.
    page.get_by_role("link", name="Question 9, not answered").click()
    expect(page.get_by_text(re.compile(r"^Question 9 of 25"))).to_be_visible()
    page.get_by_role("link", name="Question 1, not answered").click()

    answer_all(page, module_202, right=25)
    expect(page.get_by_test_id("score")).to_have_text("25/25")
    expect(page.get_by_text("100.0% correct")).to_be_visible()
    expect(page.get_by_text("Passed", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Expert level")).to_be_visible()
    expect(page.get_by_text("Ready for production distributed training")).to_be_visible()

    page.get_by_role("button", name="Back to the quiz").click()
    expect(page.get_by_role("cell", name="25/25 (100.0%)")).to_be_visible()
    page.get_by_role("button", name="Start a new attempt").click()
    answer_all(page, module_202, right=19)
    expect(page.get_by_test_id("score")).to_have_text("19/25")
    expect(page.get_by_text("Not passed")).to_be_visible()
    expect(page.get_by_role("heading", name="Good foundation")).to_be_visible()
    expect(page.locator("article.review.wrong")).to_have_count(6)

    page.get_by_role("button", name="Back to the quiz").click()
    expect(page.locator("table.history tbody tr")).to_have_count(2)
    expect(page.get_by_text("Your best")).to_be_visible()
