"""Sign up, sign in, navigate, sign out, and be turned away: in a real Chromium."""

from __future__ import annotations

import itertools
import re

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import INSTRUCTOR

pytestmark = pytest.mark.browser
_names = itertools.count(1)


def new_username() -> str:
    return f"student{next(_names)}"


def sign_up(page: Page, username: str, password: str = "a-good-password") -> None:
    page.goto("/signup")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign up").click()


def sign_in(page: Page, username: str, password: str) -> None:
    page.goto("/signin")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()


def test_sign_up_see_dashboard_navigate_and_sign_out(page: Page) -> None:
    username = new_username()
    sign_up(page, username)
    expect(page).to_have_url(re.compile(r"/$"))
    # A new account's first visit: "Welcome", not "Welcome back".
    expect(page.get_by_role("heading", name=f"Welcome, {username}")).to_be_visible()
    expect(page.get_by_text("cards to study today")).to_be_visible()

    nav = page.get_by_role("navigation", name="Main")
    for link, heading in (
        ("Flashcards", "Flashcards"),
        ("Quizzes", "Quizzes"),
        ("Exercises & Labs", "Exercises & Labs"),
        ("Help", "Help"),
    ):
        nav.get_by_role("link", name=link, exact=True).click()
        expect(page.get_by_role("heading", level=1)).to_have_text(heading)
        expect(nav.get_by_role("link", name=link, exact=True)).to_have_attribute("aria-current", "page")
    expect(nav.get_by_role("link", name="Instructor")).to_have_count(0)

    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("link", name="Sign in")).to_be_visible()
    expect(page.get_by_role("heading", name="Learn distributed training by doing")).to_be_visible()


def test_sign_in_with_wrong_password_then_right_one(page: Page) -> None:
    username = new_username()
    sign_up(page, username, "right-password-1")
    page.get_by_role("button", name="Sign out").click()

    sign_in(page, username, "wrong-password-1")
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
    expect(page.get_by_label("Username")).to_have_value(username)

    sign_in(page, username, "right-password-1")
    expect(page.get_by_role("heading", name=f"Welcome, {username}")).to_be_visible()  # still its first visit


def test_student_is_turned_away_from_instructor_page(page: Page) -> None:
    sign_up(page, new_username())
    response = page.goto("/instructor")
    assert response is not None and response.status == 403
    expect(page.get_by_role("heading", level=1)).to_contain_text("Not allowed")


def test_instructor_sees_instructor_page(page: Page) -> None:
    sign_in(page, *INSTRUCTOR)
    expect(page).to_have_url(re.compile(r"/instructor$"))  # staff land on their own home
    expect(page.get_by_role("heading", level=1)).to_have_text("Instructor")
    page.goto("/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Instructor").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Instructor")
    expect(page.get_by_text("students ·")).to_be_visible()


def test_protected_page_sends_to_sign_in_and_back(page: Page) -> None:
    sign_up(page, username := new_username())
    page.get_by_role("button", name="Sign out").click()
    page.goto("/instructor")
    expect(page).to_have_url(re.compile(r"/signin\?next=/instructor"))
    sign_in_here = page.get_by_role("button", name="Sign in")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("a-good-password")
    sign_in_here.click()
    expect(page).to_have_url(re.compile(r"/instructor$"))


def test_keyboard_navigation_and_theme_toggle(page: Page) -> None:
    page.goto("/")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    toggle = page.get_by_role("button", name="Dark theme")
    before = page.evaluate("document.documentElement.getAttribute('data-theme')")
    expect(toggle).to_have_attribute("aria-pressed", "false")  # the test browser's system theme is light
    toggle.click()
    after = page.evaluate("document.documentElement.getAttribute('data-theme')")
    assert before is None and after == "dark"
    expect(toggle).to_have_attribute("aria-pressed", "true")
    page.reload()
    assert page.evaluate("document.documentElement.getAttribute('data-theme')") == after
    expect(page.get_by_role("button", name="Dark theme")).to_have_attribute("aria-pressed", "true")
    page.get_by_role("button", name="Dark theme").click()
    expect(page.get_by_role("button", name="Dark theme")).to_have_attribute("aria-pressed", "false")


def test_a_forgotten_password_is_reset_with_a_link_from_staff(page: Page, browser: Browser, server: str) -> None:
    """The student forgot; the instructor makes a link on the student's page; the link works once."""
    username = new_username()
    sign_up(page, username, "the-first-password")
    page.get_by_role("button", name="Sign out").click()
    sign_in(page, *INSTRUCTOR)
    page.goto("/instructor/gradebook")
    page.locator(f'tr[data-student="{username}"]').get_by_role("link", name=username).click()
    page.get_by_role("button", name="Make a password reset link").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Password reset link for {username}")
    link = page.get_by_label("The link").input_value()

    student = browser.new_context(base_url=server).new_page()
    student.goto(link)
    expect(student.get_by_text(f"For the account {username}.")).to_be_visible()
    expect(student.get_by_label("New password (at least 10 characters)")).to_be_focused()
    student.get_by_label("New password (at least 10 characters)").fill("the-second-password")
    student.get_by_label("New password again").fill("the-second-password")
    student.get_by_role("button", name="Set the password").click()
    expect(student.locator("p.notice")).to_contain_text("Your new password is set")
    sign_in(student, username, "the-second-password")
    expect(student.get_by_role("heading", name=re.compile(rf"^Welcome.*, {username}$"))).to_be_visible()
    student.goto(link)  # a second time
    expect(student.get_by_role("alert")).to_contain_text("already used")
    expect(student.get_by_role("button", name="Set the password")).to_have_count(0)
    # Signed in, the student changes it again from the account link in the header.
    student.get_by_role("link", name=f"Your account: signed in as {username}").click()
    student.get_by_label("Current password").fill("the-second-password")
    student.get_by_label("New password (at least 10 characters)").fill("the-third-password")
    student.get_by_label("New password again").fill("the-third-password")
    student.get_by_role("button", name="Change the password").click()
    expect(student.locator("p.notice")).to_contain_text("Your password was changed")
    student.context.close()
