"""Ringlab on a phone (390×844, touch): the menu folds away, a tap on an option selects that option,
the study card and its buttons share the screen, and no page is wider than the screen.

Each test leaves screenshots in test-artifacts/phone/ to look at.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import ARTIFACTS
from tests.browser.pictures import picture
from tests.conftest import CONTENT_DIR

pytestmark = pytest.mark.browser
PHONE = {"width": 390, "height": 844}
SHOTS = ARTIFACTS / "phone"


@pytest.fixture
def phone(browser: Browser, server: str) -> Iterator[Page]:
    context = browser.new_context(base_url=server, viewport=PHONE, has_touch=True, is_mobile=True)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    yield page
    context.close()
    assert not errors, errors


def shot(page: Page, name: str) -> None:
    picture(page, SHOTS / f"{name}.png", full_page=False)


def fits(page: Page) -> None:
    """The page is no wider than the screen: nothing scrolls sideways."""
    width = page.evaluate("document.documentElement.scrollWidth")
    assert width <= PHONE["width"], f"{page.url} is {width}px wide on a {PHONE['width']}px screen"


def in_view(page: Page, selector: str) -> None:
    box = page.locator(selector).first.bounding_box()
    assert box is not None, selector
    assert box["y"] >= 0 and box["y"] + box["height"] <= PHONE["height"], f"{selector} is off screen: {box}"


def sign_up(page: Page) -> None:
    page.goto("/signup")
    fits(page)
    page.get_by_label("Username").fill(f"phone{secrets.token_hex(3)}")
    page.get_by_label("Password").fill("a-good-password")
    page.get_by_role("button", name="Sign up").click()
    page.wait_for_url("**/")


def test_the_menu_folds_away_and_opens(phone: Page) -> None:
    sign_up(phone)
    nav = phone.get_by_role("navigation", name="Main")
    links = nav.get_by_role("link", name="Quizzes")
    menu = nav.get_by_role("button", name="Menu")
    expect(links).to_be_hidden()
    header = phone.locator("header.site-header").bounding_box()
    assert header is not None and header["height"] < 120, header
    shot(phone, "dashboard")
    fits(phone)
    menu.tap()
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(links).to_be_visible()
    shot(phone, "menu-open")
    links.tap()
    expect(phone.get_by_role("heading", level=1)).to_have_text("Quizzes")
    expect(nav.get_by_role("link", name="Quizzes")).to_be_hidden()  # a new page starts folded again


def test_tapping_an_option_selects_that_option(phone: Page) -> None:
    sign_up(phone)
    phone.goto("/quizzes/module-202")
    phone.get_by_role("button", name="Start the quiz").tap()
    expect(phone.get_by_text("Question 1 of 25", exact=False)).to_be_visible()
    fits(phone)
    shot(phone, "quiz")
    for number in (1, 2):
        # The question has been swapped in (htmx) before anything on it is tapped.
        expect(phone.locator(".question-meta")).to_contain_text(f"Question {number} of 25")
        option = phone.locator("label.option", has=phone.locator("input[value='A']"))
        option.scroll_into_view_if_needed()
        option.tap()
        expect(option.locator("input")).to_be_checked()
        expect(phone.locator(".question-meta")).to_contain_text(f"Question {number} of 25")  # not another question
        expect(phone.get_by_text(f"{number} of 25 answered")).to_be_visible()
        # Every option is the topmost element at its own centre: nothing lies over the options.
        for label in phone.locator("label.option").all():
            label.scroll_into_view_if_needed()
            box = label.bounding_box()
            assert box is not None
            x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
            assert phone.evaluate(f"document.elementFromPoint({x}, {y}).closest('label.option') !== null")
        phone.get_by_role("button", name="Next →").tap()
    shot(phone, "quiz-answered")
    # The question grid is still there, below the question.
    grid = phone.get_by_role("navigation", name="Questions")
    grid.get_by_role("link", name="Question 1, answered").tap()  # perhaps while question 3 is still on its way
    expect(phone.locator(".question-meta")).to_contain_text("Question 1 of 25")
    expect(phone.locator("form.answer-form input[value='A']")).to_be_checked()


def test_the_study_card_and_its_buttons_share_the_screen(phone: Page) -> None:
    sign_up(phone)
    phone.goto("/flashcards/mire-dis-train/study")
    fits(phone)
    phone.get_by_role("button", name="Show answer").tap()
    expect(phone.locator("#reviewer .answer")).to_be_visible()
    shot(phone, "study-answer")
    in_view(phone, "#reviewer .study-card .front")
    for raw in range(1, 6):
        in_view(phone, f"#reviewer [data-rate='{raw}']")
    fits(phone)
    phone.locator("#reviewer [data-rate='4']").tap()
    expect(phone.locator('#reviewer [data-count="new"]')).to_have_text("19")
    phone.goto("/flashcards/mire-dis-train/stats")
    shot(phone, "stats")
    fits(phone)


def test_exercise_lab_and_other_pages_fit_the_screen(phone: Page) -> None:
    sign_up(phone)
    for path in ("/", "/quizzes", "/quizzes/module-202", "/exercises", "/exercises/ch26-exercises",
                 "/exercises/ch35-exercises", "/labs", "/flashcards", "/flashcards/mire-dis-train",
                 "/flashcards/mire-dis-train/cards/mdt-001", "/flashcards/settings", "/flashcards/missed",
                 "/flashcards/mine", "/reports", "/help"):  # fmt: skip
        phone.goto(path)
        fits(phone)
    phone.goto("/exercises/ch26-exercises")
    shot(phone, "exercises")

    phone.goto("/labs/ring-allreduce")
    fits(phone)
    solution = CONTENT_DIR / "labs" / "ring-allreduce" / "solution.py"
    phone.get_by_label("Or upload a .py file").set_input_files(str(solution))
    phone.get_by_role("button", name="Submit").tap()
    result = phone.locator("#lab-result")
    expect(result).to_have_attribute("data-status", "graded", timeout=60_000)
    expect(result.get_by_text("10/10 Passed")).to_be_visible()
    # A touch screen has no hover: the picture's hint points at the table of numbers instead.
    expect(result.get_by_text('"The numbers" under each picture gives every exact count.')).to_be_visible()
    expect(result.get_by_text("hover a cell for its exact count", exact=False)).to_be_hidden()
    result.scroll_into_view_if_needed()
    shot(phone, "lab-result")
    fits(phone)
    phone.goto("/labs/ring-allreduce/reference")  # full marks: the comparison opens, and scrolls in its frame
    expect(phone.get_by_role("table", name="beside the reference solution")).to_be_attached()
    fits(phone)
    phone.goto("/labs/ring-allreduce")
    report = phone.locator(".report-problem").first
    report.locator("summary").tap()
    expect(report.get_by_role("textbox")).to_be_visible()
    fits(phone)
    phone.goto("/")  # the dashboard now lists the lab score and the lab as passed
    expect(phone.locator('[data-results="labs"]')).to_contain_text("10/10")
    fits(phone)
