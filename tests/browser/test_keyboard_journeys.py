"""Keyboard only, in a real Chromium: a quiz from start to result, ten cards rated, an exercise part.

Every step presses keys through ``page.keyboard`` (Tab, Space, Enter, arrows, typing) and is
bounded: after an htmx swap, focus is where the person goes on (the next question's heading, the
next card, the field to retry), and the next control is a key or two away. Signing up and
opening a page by its address are the only steps that are not keys.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from app.content.loader import load_tree
from tests.browser.conftest import sign_up
from tests.conftest import CONTENT_DIR

pytestmark = pytest.mark.browser
DECK = "/flashcards/mire-dis-train"
EXERCISE = "/exercises/ch26-exercises/ex-26-1"
NAMES = {1: "Again", 2: "Again", 3: "Hard", 4: "Good", 5: "Easy"}

# What has focus: enough to say where it is without a selector per page.
_FOCUSED = """() => {
  const e = document.activeElement;
  if (!e || e === document.body) return {tag: "body", id: "", text: "", classes: "", value: "", label: ""};
  return {tag: e.tagName.toLowerCase(), id: e.id, text: e.textContent.replace(/\\s+/g, " ").trim(),
          classes: e.className, value: e.value || "", label: e.getAttribute("aria-label") || ""};
}"""


def focused(page: Page) -> dict[str, Any]:
    result: dict[str, Any] = page.evaluate(_FOCUSED)
    return result


def tab_until(page: Page, wanted: Any, limit: int, *, back: bool = False) -> int:
    """Press Tab (Shift+Tab with ``back``) until ``wanted(focused)`` holds; the number of presses, at most ``limit``."""
    for presses in range(1, limit + 1):
        page.keyboard.press("Shift+Tab" if back else "Tab")
        if wanted(focused(page)):
            return presses
    raise AssertionError(f"not reached in {limit} presses; focus is on {focused(page)}")


def is_rating(f: dict[str, Any], raw: int) -> bool:
    return f["tag"] == "button" and "rate" in f["classes"].split() and f["value"] == str(raw)


@pytest.fixture(scope="module")
def module_202() -> dict[str, str]:
    """Question id -> the right option, from the content files."""
    quiz = next(q for q in load_tree(CONTENT_DIR).quizzes if q.id == "module-202")
    return {q.id: q.answer for q in quiz.questions}


def choose(page: Page, options: list[str], choice: str) -> int:
    """From the first option (focused, none chosen), choose ``choice`` with Space and arrows; the keys pressed."""
    steps = options.index(choice)
    # Down to the choice, or up round the end when that is shorter; each arrow chooses (and saves).
    keys = ["Space"] if steps == 0 else ["ArrowDown"] * steps
    if steps and len(options) - steps < steps:
        keys = ["ArrowUp"] * (len(options) - steps)
    for key in keys:
        with page.expect_response(lambda r: "/answers/" in r.url):
            page.keyboard.press(key)
    expect(page.locator(f"form.answer-form input[value='{choice}']")).to_be_checked()
    return len(keys)


def test_take_module_202_with_the_keyboard(page: Page, module_202: dict[str, str]) -> None:
    sign_up(page, "keyboarder")
    page.goto("/quizzes/module-202")
    start = tab_until(page, lambda f: f["tag"] == "button" and f["text"] == "Start the quiz", limit=20)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name=re.compile(r"^Question 1 of 25"))).to_be_visible()

    # A fresh page: past the site's links, "Skip to the question" lands on the question's heading.
    skip = tab_until(page, lambda f: f["text"] == "Skip to the question", limit=13)
    page.keyboard.press("Enter")
    assert focused(page)["id"] == "question-heading"
    announcer = page.locator("#announcer")
    counts: dict[str, list[int]] = {"tabs to the options": [], "keys to choose": [], "tabs to next": []}
    for n in range(1, 26):
        heading = focused(page)
        assert heading["tag"] == "h2" and heading["text"].startswith(f"Question {n} of 25"), heading
        counts["tabs to the options"].append(tab_until(page, lambda f: f["tag"] == "input", limit=3))
        qid = page.locator("form.answer-form").get_attribute("data-question-id")
        assert qid is not None
        answer = module_202[qid]
        options: list[str] = page.locator("form.answer-form input[type=radio]").evaluate_all(
            "rs => rs.map(r => r.value)"
        )
        assert focused(page)["value"] == options[0], (n, options)
        counts["keys to choose"].append(choose(page, options, answer))
        # The save is said by the page's live region, which stays put while the question grid is swapped.
        expect(announcer).to_have_text(f"Saved. Answered so far: {n} of 25.")
        assert focused(page)["value"] == answer  # the save swapped the grid, not the focus
        label = "Next →" if n < 25 else "Review and submit →"
        counts["tabs to next"].append(tab_until(page, lambda f, label=label: f["text"] == label, limit=2))
        page.keyboard.press("Space")  # a link drawn as a button answers Space as a button does
        if n < 25:
            expect(page.get_by_role("heading", name=re.compile(rf"^Question {n + 1} of 25"))).to_be_focused()

    confirm = page.get_by_role("heading", name="Submit your attempt?")
    expect(confirm).to_be_focused()
    expect(page.get_by_text("All 25 questions are answered.")).to_be_visible()
    submit = tab_until(page, lambda f: f["text"] == "Submit attempt", limit=1)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Your result")).to_be_visible()
    expect(page.get_by_test_id("score")).to_have_text("25/25")

    assert start <= 20 and skip <= 13 and submit == 1  # the site's links (with Courses), the timer, then the skip link
    assert set(counts["tabs to the options"]) == {1}
    assert max(counts["keys to choose"]) <= 2
    assert counts["tabs to next"] == [1] + [2] * 24  # past "← Previous" from question 2 on


def test_rate_ten_cards_with_each_rating(page: Page) -> None:
    sign_up(page, "keyboarder")
    page.goto(f"{DECK}/study")
    reviewer = page.locator("#reviewer")
    announcer = page.locator("#announcer")
    keys_to_reveal: list[int] = []
    for n, raw in enumerate([1, 2, 3, 4, 5, 5, 4, 3, 2, 1], start=1):
        card_id = reviewer.locator(".study-card").get_attribute("data-card-id")
        answer = reviewer.locator(".answer")
        expect(answer).to_be_hidden()
        if n > 1:
            # After a rating, focus is on the new card.
            assert focused(page)["classes"] == "study-card", focused(page)
        if n % 2:
            page.keyboard.press("Space")  # the card has focus, not a control: Space shows the answer
            keys_to_reveal.append(1)
        else:
            tabs = tab_until(page, lambda f: f["text"].startswith("Show answer"), limit=1)
            page.keyboard.press("Enter")
            keys_to_reveal.append(tabs + 1)
        expect(answer).to_be_visible()
        # The answer takes the focus (the button that had it is gone); rating k is k Tabs on.
        assert focused(page)["label"] == "Answer"
        assert tab_until(page, lambda f, raw=raw: is_rating(f, raw), limit=raw) == raw
        assert NAMES[raw] in focused(page)["text"]
        page.keyboard.press("Space")
        expect(announcer).to_contain_text(f"Rated {NAMES[raw]}.")
        expect(reviewer.locator(".study-card")).not_to_have_attribute("data-card-id", card_id or "")
        expect(reviewer.locator(".study-card")).to_be_focused()
    assert max(keys_to_reveal) <= 2
    expect(reviewer.locator('[data-count="new"]')).to_have_text("10")


def test_space_on_a_focused_control_is_that_control(page: Page) -> None:
    sign_up(page, "keyboarder")
    page.goto(f"{DECK}/study")
    reviewer = page.locator("#reviewer")
    announcer = page.locator("#announcer")
    answer = reviewer.locator(".answer")

    # Space on "1 Again" records Again, not Good.
    page.keyboard.press("Space")
    expect(answer).to_be_visible()
    tab_until(page, lambda f: is_rating(f, 1), limit=1)
    page.keyboard.press("Space")
    expect(announcer).to_contain_text("Rated Again.")
    expect(reviewer.locator('[data-count="new"]')).to_have_text("19")

    # Space on the theme toggle switches the theme; it does not show the answer.
    page.locator("[data-theme-toggle]").focus()
    theme = page.evaluate("document.documentElement.getAttribute('data-theme') || ''")
    page.keyboard.press("Space")
    expect(page.locator("html")).not_to_have_attribute("data-theme", theme)
    expect(answer).to_be_hidden()

    # Space on Undo undoes; it does not show the next card's answer.
    undo = reviewer.get_by_role("button", name=re.compile("Undo"))
    undo.focus()
    page.keyboard.press("Space")
    expect(announcer).to_contain_text("Undone")
    expect(reviewer.locator('[data-count="new"]')).to_have_text("20")
    expect(reviewer.locator(".answer")).to_be_hidden()


def test_one_key_shortcuts_can_be_turned_off(page: Page) -> None:
    sign_up(page, "keyboarder")
    page.goto("/flashcards/settings")
    page.get_by_role("radio", name="Off").check()
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("Settings saved.")).to_be_visible()
    expect(page.get_by_role("radio", name="Off")).to_be_checked()

    page.goto(f"{DECK}/study")
    reviewer = page.locator("#reviewer")
    new = reviewer.locator('[data-count="new"]')
    answer = reviewer.locator(".answer")
    expect(reviewer).to_have_attribute("data-shortcuts", "off")
    expect(page.get_by_text("One-key shortcuts are off")).to_be_visible()
    page.keyboard.press("Space")
    page.keyboard.press("Enter")
    expect(answer).to_be_hidden()  # neither key is a shortcut now

    # The buttons still answer Space and Enter.
    reviewer.get_by_role("button", name="Show answer").focus()
    page.keyboard.press("Space")
    expect(answer).to_be_visible()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/study/" in r.url else None)
    for key in ("1", "4", "5", "u", "-", "@"):
        page.keyboard.press(key)
    page.wait_for_timeout(300)
    assert requests == []
    expect(new).to_have_text("20")
    expect(answer).to_be_visible()

    tab_until(page, lambda f: is_rating(f, 3), limit=3)
    page.keyboard.press("Enter")
    expect(page.locator("#announcer")).to_contain_text("Rated Hard.")
    expect(new).to_have_text("19")
    # Ctrl+Z is not a one-key shortcut: it still undoes.
    page.keyboard.press("Control+z")
    expect(page.locator("#announcer")).to_contain_text("Undone")
    expect(new).to_have_text("20")


def test_answer_an_exercise_part_wrong_then_right(page: Page) -> None:
    sign_up(page, "keyboarder")
    page.goto(EXERCISE)
    field = "Your answer in samples"
    # A fresh page: the site's links, the breadcrumb and the exercise's own, then the first part (11 today).
    tab_until(page, lambda f: f["label"] == field, limit=15)
    page.keyboard.type("2000")
    page.keyboard.press("Enter")
    part = page.locator("#part-a-global-batch")
    expect(part.get_by_text("Not quite: 2000 is not right")).to_be_visible()
    # The field is focused again, described by what was wrong, and the verdict is said.
    expect(part.get_by_label(field)).to_be_focused()
    expect(part.get_by_label(field)).to_have_attribute("aria-describedby", "wrong-a-global-batch")
    expect(page.locator("#announcer")).to_contain_text("Not quite: 2000 is not right. Try again.")

    page.keyboard.press("Control+a")
    page.keyboard.type("2,048")
    tab_until(page, lambda f: f["text"] == "Check", limit=1)
    page.keyboard.press("Space")
    verdict = part.locator(".verdict")
    expect(verdict).to_contain_text("✓ Correct")
    expect(verdict).to_be_focused()
    expect(page.locator("#announcer")).to_contain_text("✓ Correct: the answer is 2,048 samples · 2 attempts")
