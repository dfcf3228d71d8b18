"""A timed quiz with extra time, in a real Chromium: an instructor grants time and a half; the student's
quiz page says 90 minutes, the clock counts down their own deadline, and the time left is said (in the
page's live region) when asked, at the marks, with a written warning near the end, and when it is up.

The page's clock is Playwright's: the test moves it on instead of waiting an hour and a half.
"""

from __future__ import annotations

import re
import secrets

import httpx
import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import INSTRUCTOR

pytestmark = pytest.mark.browser
PASSWORD = "a-long-password-1"
SAVED = r"Your answers are saved; the attempt will be submitted automatically at \d\d:\d\d\."


def seconds_shown(page: Page) -> int:
    text = page.locator("[data-countdown-value]").inner_text()
    parts = [int(p) for p in text.split(":")]
    return sum(p * 60**i for i, p in enumerate(reversed(parts)))


def run_to(page: Page, seconds_left: int) -> None:
    """Move the page's clock on until the countdown shows ``seconds_left`` (give or take a second)."""
    page.clock.run_for((seconds_shown(page) - seconds_left) * 1000 + 300)


def test_a_student_with_time_and_a_half_hears_their_own_countdown(page: Page, browser: Browser, server: str) -> None:
    name = f"tim{secrets.token_hex(3)}"
    with httpx.Client(base_url=server, timeout=30) as api:
        assert api.post("/api/v1/auth/register", json={"username": name, "password": PASSWORD}).status_code == 201

    staff = browser.new_context(base_url=server)
    prof = staff.new_page()
    prof.goto("/signin")
    prof.get_by_label("Username").fill(INSTRUCTOR[0])
    prof.get_by_label("Password").fill(INSTRUCTOR[1])
    prof.get_by_role("button", name="Sign in").click()
    prof.goto(f"/instructor/gradebook?q={name}")
    prof.get_by_role("link", name=name, exact=True).click()
    prof.get_by_label("Time multiplier").fill("1.5")
    prof.get_by_label("Note").fill("letter of 3 March")
    prof.get_by_role("button", name="Grant extra time").click()
    expect(prof.get_by_test_id("accommodation-notice")).to_contain_text("Saved: the extra time applies")
    expect(prof.get_by_test_id("accommodation")).to_contain_text("90 minutes instead of 60")
    staff.close()

    page.clock.install()
    page.goto("/signin")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.goto("/quizzes/module-202")
    expect(page.get_by_test_id("time-limit")).to_have_text(
        "90 minutes (with your extra-time accommodation; the quiz's limit is 60 minutes)"
    )
    page.get_by_role("button", name="Start the quiz").click()
    expect(page.get_by_role("timer")).to_contain_text(re.compile(r"Time left\s+1:(29:[0-5]\d|30:00)"))
    assert 5340 < seconds_shown(page) <= 5400

    announcer = page.locator("#announcer")
    page.get_by_role("button", name="Say the time left").click()
    expect(announcer).to_have_text(re.compile(rf"^1 hour 29 minutes left\. {SAVED}$"))
    warning = page.locator("[data-countdown-warning]")
    expect(warning).to_be_hidden()

    run_to(page, 1800)
    expect(announcer).to_have_text("30 minutes left.")
    run_to(page, 300)
    expect(announcer).to_have_text(re.compile(rf"^5 minutes left\. {SAVED}$"))
    expect(warning).to_be_visible()
    expect(warning).to_have_text(re.compile(rf"^Time is nearly up\. {SAVED}$"))
    run_to(page, 60)
    expect(announcer).to_have_text("1 minute left.")
    run_to(page, 0)
    expect(page.get_by_role("timer")).to_contain_text("Time is up")
    expect(announcer).to_have_text(
        "Time is up. Your attempt was submitted automatically with the answers you saved. Opening your result."
    )
    expect(warning).to_have_text(re.compile(r"^Time is up\. Your attempt has been submitted"))
