"""A student reviews ten cards with the keyboard and sees the counts and the forecast change."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from playwright.sync_api import Page, expect

from tests.browser.test_accounts_journey import new_username, sign_up

pytestmark = pytest.mark.browser
DECK = "/flashcards/mire-dis-train"


def forecast_total(page: Page) -> int:
    page.goto(f"{DECK}/stats")
    text = page.locator('[data-stat="forecast-total"]').inner_text()
    return int(text.split()[0])


def midday_zone() -> str:
    """A zone where it is about noon now: the study day (from 04:00) has hours left for the learning steps."""
    offset = 12 - datetime.now(UTC).hour  # -11 .. +12
    return "UTC" if offset == 0 else f"Etc/GMT{-offset:+d}"  # POSIX signs: Etc/GMT-3 is UTC+3


def set_time_zone(page: Page, zone: str) -> None:
    page.goto("/flashcards/settings")
    page.get_by_label("Time zone").select_option(zone)
    page.get_by_role("button", name="Save settings").click()
    expect(page.get_by_text("Settings saved.")).to_be_visible()


def test_review_ten_cards_with_the_keyboard(page: Page) -> None:
    sign_up(page, new_username())
    # Learning cards count today only while due before the day ends (04:00 local, as in Anki); at
    # 03:50 in the student's zone a 10-minute step belongs to tomorrow. Study at noon, whatever the clock.
    set_time_zone(page, midday_zone())
    assert forecast_total(page) == 0

    page.goto(f"{DECK}/study")
    reviewer = page.locator("#reviewer")
    new = reviewer.locator('[data-count="new"]')
    learning = reviewer.locator('[data-count="learning"]')
    expect(new).to_have_text("20")
    expect(page.get_by_text("1 and 2 count as Again, 3 Hard, 4 Good, 5 Easy")).to_be_hidden()
    url = page.url

    ratings = ["4", "5", "3", "1", "5", "4", "2", "5", "4", "5"]
    for n, digit in enumerate(ratings, start=1):
        card = reviewer.locator(".study-card")
        card_id = card.get_attribute("data-card-id")
        answer = reviewer.locator(".answer")
        expect(answer).to_be_hidden()
        page.keyboard.press("Space")
        expect(answer).to_be_visible()
        expect(reviewer.get_by_role("button", name=re.compile(r"Good"))).to_contain_text(re.compile(r"\d+[smhd]"))
        page.keyboard.press(digit)
        expect(new).to_have_text(str(20 - n))
        expect(reviewer.locator(".study-card")).not_to_have_attribute("data-card-id", card_id or "")
    # 4, 3, 1, 4, 2, 4 left six cards in learning; 5 (Easy) sent four straight to review.
    expect(learning).to_have_text("6")
    assert page.url == url  # htmx swapped the card; the page never reloaded

    page.keyboard.press("u")
    expect(page.locator("#announcer")).to_contain_text("Undone")  # said by the page's live region
    expect(reviewer.locator(".notice")).to_contain_text("Undone")
    expect(new).to_have_text("11")
    page.keyboard.press("Space")
    page.keyboard.press("5")
    expect(new).to_have_text("10")

    assert forecast_total(page) == 10
    expect(page.locator("#forecast svg rect")).not_to_have_count(0)
