"""A corrected key reaches a student who already sat the quiz: in a real Chromium, against a server
that first serves Module 202 as its source keyed it (question 23: D) and is then synced with the
corrected content by `ringlab content sync` (run in the test process: tests.cli), as a course upgrading its
server would."""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import INSTRUCTOR, serve, server_env, sign_up
from tests.cli import ringlab
from tests.conftest import CONTENT_DIR

pytestmark = pytest.mark.browser
QUIZ = Path("quizzes/module-202.yaml")


def _as_the_source_keyed_it(content: Path) -> None:
    """Module 202 with question 23 as its source printed it: key D, no erratum."""
    path = content / QUIZ
    quiz = yaml.safe_load(path.read_text(encoding="utf-8"))
    q23 = next(q for q in quiz["questions"] if q["id"] == "m202-q23")
    for erratum in q23.pop("errata"):
        q23[erratum["field"]] = erratum["source"]
    assert q23["answer"] == "D"
    path.write_text(yaml.safe_dump(quiz, sort_keys=False, allow_unicode=True), encoding="utf-8")


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, Path]]:
    """(base URL, the server's content folder, its data folder) of a server on the uncorrected quiz."""
    data = tmp_path_factory.mktemp("errata-data")
    content = tmp_path_factory.mktemp("errata-content") / "content"
    shutil.copytree(CONTENT_DIR, content)
    _as_the_source_keyed_it(content)
    with serve(data, RINGLAB_CONTENT_DIR=str(content), RINGLAB_EMBEDDED_WORKER="false") as base:
        yield base, content, data


def test_a_student_who_chose_c_on_question_23_gains_the_point(
    browser: Browser, upgraded: tuple[str, Path, Path]
) -> None:
    base, content, data = upgraded
    context = browser.new_context(base_url=base)
    page: Page = context.new_page()
    sign_up(page, "errata")
    page.goto("/quizzes/module-202")
    page.get_by_role("button", name="Start the quiz").click()
    page.get_by_role("link", name="Question 23, not answered").click()
    expect(page.get_by_text(re.compile(r"^Question 23 of 25"))).to_be_visible()
    assert page.locator("form.answer-form").get_attribute("data-question-id") == "m202-q23"
    page.locator("form.answer-form input[value='C']").check()
    # The letters shown follow the attempt's shuffle: the options authored as C and D, as this student saw them.
    shown = {k: page.locator(f"label.option:has(input[value='{k}']) .option-key").inner_text() for k in "CD"}
    expect(page.get_by_text("1 of 25 answered")).to_be_visible()
    # The student doubts the key and reports it without leaving the attempt.
    page.get_by_text("Report a problem").click()
    page.get_by_label("What is wrong with this question?").fill("I get 0.84 from the working: not the keyed option.")
    page.get_by_role("button", name="Send report").click()
    sent = page.locator(".report-sent")
    expect(sent).to_be_focused()
    expect(sent).to_contain_text("your report on this question was sent to the course staff")
    expect(page.locator("#announcer")).to_have_text("Thank you: your report was sent to the course staff.")
    expect(page.get_by_text(re.compile(r"^Question 23 of 25"))).to_be_visible()
    page.get_by_role("button", name="Finish attempt…").click()
    page.get_by_role("button", name="Submit attempt").click()
    expect(page.get_by_role("heading", name="Your result")).to_be_visible()
    expect(page.get_by_test_id("score")).to_have_text("0/25")  # C was marked wrong against the source's D

    shutil.copy(CONTENT_DIR / QUIZ, content / QUIZ)  # the corrected quiz
    sync = ringlab("content", "sync", str(content), env=server_env(data))
    assert sync.returncode == 0, sync.stderr
    assert "rescored 1 quiz attempt" in sync.stdout

    # The instructor sees the report, that the key changed since and the sync's re-score, and answers.
    staff = browser.new_context(base_url=base)
    prof = staff.new_page()
    prof.goto("/signin")
    prof.get_by_label("Username").fill(INSTRUCTOR[0])
    prof.get_by_label("Password").fill(INSTRUCTOR[1])
    prof.get_by_role("button", name="Sign in").click()
    expect(prof.locator('[data-figure="open-reports"]')).to_have_text("1")
    prof.get_by_role("link", name="Problem reports").click()
    report = prof.get_by_role("article").filter(has_text="I get 0.84 from the working")
    expect(report.get_by_test_id("changed")).to_contain_text("its key changed")
    expect(report.get_by_test_id("rescore-summary")).to_contain_text("1 submitted attempt of 1 student re-marked")
    report.get_by_label("Answer to the student").fill("You are right: the key is now C and your attempt is re-scored.")
    report.get_by_role("button", name="Answer and close").click()
    expect(prof.get_by_test_id("notice")).to_contain_text("Answered and closed")
    staff.close()

    # The student reads the answer and follows it to the corrected score.
    page.goto("/reports")
    expect(page.get_by_test_id("answer")).to_contain_text("You are right: the key is now C")
    page.get_by_role("link", name="see your corrected score and why").click()
    page.reload()
    expect(page.get_by_test_id("score")).to_have_text("1/25")
    rescored = page.get_by_role("region", name="Re-scored")
    expect(rescored).to_contain_text(
        f"the key of question 23 was corrected from {shown['D']} to {shown['C']}; you chose {shown['C']}."
    )
    expect(rescored).to_contain_text("Score 0/25 → 1/25.")
    expect(rescored).to_contain_text("Corrected: the source keyed 99.9%")
    rescored.get_by_role("link", name="question 23").click()
    review = page.locator("#review-23")
    expect(review.get_by_text("Correct", exact=True)).to_be_visible()
    expect(review.locator("[role=note].erratum[data-field='answer']")).to_contain_text("Corrected:")
    context.close()
