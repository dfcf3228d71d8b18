"""Solve an exercise part in a real Chromium: filter the set, answer wrong, malformed, then right; a hint after
two wrong answers; give up on a part and see it marked."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from tests.browser.pictures import picture

pytestmark = pytest.mark.browser


def shot(page: Page, name: str) -> None:
    # RINGLAB_SCREENSHOT_DIR=test-artifacts keeps a picture of each step to look at.
    folder = os.environ.get("RINGLAB_SCREENSHOT_DIR")
    if folder:
        picture(page, Path(folder) / f"{name}.png")


def test_solve_an_exercise_part(page: Page) -> None:
    page.goto("/signup")
    page.get_by_label("Username").fill("solver1")
    page.get_by_label("Password").fill("a-good-password")
    page.get_by_role("button", name="Sign up").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Exercises & Labs").click()
    page.get_by_role("link", name="Chapter 26: Exercises").click()

    # Filters swap the list in place (htmx) and keep the address shareable.
    contents = page.get_by_role("navigation", name="Contents")
    expect(contents.get_by_role("link")).to_have_count(27)
    page.get_by_label("Difficulty", exact=True).select_option("1")
    expect(page).to_have_url(re.compile(r"difficulty=1"))
    page.get_by_label("Section", exact=True).select_option("data-parallelism")
    expect(contents.get_by_role("link")).to_have_count(2)  # 26.1 and 26.2
    expect(page.get_by_text("2 of 27 exercises")).to_be_visible()
    shot(page, "exercises-set-filtered")
    page.get_by_role("link", name="Exercise 26.1").click()

    part = page.locator("#part-a-global-batch")
    box = part.get_by_label("Your answer in samples")
    box.fill("2000")
    part.get_by_role("button", name="Check").click()
    expect(part.get_by_text("Not quite: 2000 is not right")).to_be_visible()
    # The box keeps what was typed and has the focus again; the page's live region says the verdict.
    box = part.get_by_label("Your answer in samples")
    expect(box).to_have_value("2000")
    expect(box).to_be_focused()
    expect(page.locator("#announcer")).to_contain_text("Not quite: 2000 is not right")
    box.fill("two thousand")
    part.get_by_role("button", name="Check").click()
    expect(part.get_by_role("alert")).to_contain_text("'two thousand' is not a number")
    box = part.get_by_label("Your answer in samples")
    expect(box).to_have_value("two thousand")
    box.fill("2,048")
    part.get_by_role("button", name="Check").click()
    expect(part.get_by_text("✓ Correct")).to_be_visible()
    expect(part.get_by_label("Your answer in samples")).to_have_value("2,048")  # the accepted answer, kept
    expect(page.locator("#exercise-badges")).to_contain_text("1/6 parts solved")
    expect(part.get_by_text("2 attempts")).to_be_visible()
    expect(part.locator(".explanation math").first).to_be_visible()  # the worked solution, as MathML

    # The percent part takes a fraction; "show solution" asks first.
    fraction = page.locator("#part-b-fraction")
    fraction.get_by_label("Your answer in %").fill("0.01456")
    fraction.get_by_role("button", name="Check").click()
    expect(fraction.get_by_text("✓ Correct")).to_be_visible()
    # Two wrong answers: the hint is offered; opening it moves the focus to it.
    steps = page.locator("#part-a-sync-steps")
    for wrong in ("600", "650"):
        steps.get_by_label("Your answer in steps").fill(wrong)
        steps.get_by_role("button", name="Check").click()
        expect(steps.get_by_text(f"Not quite: {wrong} is not right")).to_be_visible()
    expect(steps.get_by_text("A hint is offered below.")).to_be_visible()
    steps.get_by_role("button", name="Show a hint").click()
    hint = steps.locator(".hint")
    expect(hint).to_contain_text("one pass over all 1.28M images")
    expect(hint).to_be_focused()
    shot(page, "exercise-part-hint")

    # "Show the answer" asks first, then shows the worked answer and marks the part as given up.
    fraction_c = page.locator("#part-c-fraction")
    expect(fraction_c.locator(".explanation")).to_have_count(0)
    page.once("dialog", lambda dialog: dialog.accept())
    fraction_c.get_by_role("button", name="Show the answer").click()
    expect(fraction_c.get_by_text("You gave up")).to_be_visible()
    expect(fraction_c.locator(".explanation")).to_contain_text("0.06804")
    expect(page.locator("#exercise-badges")).to_contain_text("gave up on 1")
    shot(page, "exercise-part-solved")

    # Private notes and "mark as done".
    page.get_by_label("Your notes on this exercise").fill("Latency term matters more at 64 GPUs.")
    page.get_by_role("button", name="Save notes").click()
    expect(page.get_by_text("Notes saved.")).to_be_visible()
    page.get_by_role("button", name="Mark as done").click()
    expect(page.get_by_role("button", name="Mark as not done")).to_be_visible()

    page.reload()
    expect(page.locator("#part-a-global-batch").get_by_text("✓ Solved")).to_be_visible()
    expect(page.get_by_label("Your notes on this exercise")).to_have_value("Latency term matters more at 64 GPUs.")
    page.get_by_role("link", name="Chapter 26: Exercises").click()
    entry = page.get_by_role("navigation", name="Contents").get_by_role("listitem").filter(has_text="26.1")
    expect(entry.get_by_text("2/6 parts solved")).to_be_visible()
    expect(entry.get_by_text("gave up on 1")).to_be_visible()
    expect(entry.get_by_text("done", exact=True)).to_be_visible()
