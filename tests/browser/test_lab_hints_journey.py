"""A student fails a ring check twice, reveals a hint, passes, compares with the reference, and follows
the dashboard's suggested next lab.

Graded for real by the server's embedded worker. The same pages are then read at phone size
(390x844): the hint and the side-by-side comparison fit the screen.
"""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from labs.spec import load_lab, mutants
from tests.browser.conftest import sign_up
from tests.browser.test_lab_journey import _paste_code
from tests.conftest import CONTENT_DIR, LAB_COUNT

RING = CONTENT_DIR / "labs" / "ring-allreduce"


def _submit(page: Page, code: str, status: str) -> None:
    _paste_code(page, code)
    number = page.locator("#lab-result h2").inner_text() if page.locator("#lab-result h2").count() else ""
    page.get_by_role("button", name="Submit").click()
    result = page.locator("#lab-result")
    expect(result.locator("h2")).not_to_have_text(number or "-", timeout=10_000)
    expect(result).to_have_attribute("data-status", status, timeout=240_000)


def _fits(page: Page) -> bool:
    return bool(page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"))


def test_fail_twice_reveal_a_hint_then_pass_and_compare_with_the_reference(page: Page) -> None:
    sign_up(page, "hints")
    page.goto("/labs/ring-allreduce")
    wrong = next(m.code for m in mutants.load(load_lab(RING)) if m.name == "through_rank_zero")  # right sums, no ring

    _submit(page, wrong, "graded")
    hints = page.locator('#lab-result [data-hints-for="ring-neighbours"]')
    expect(hints).to_contain_text("Hint 1 of 2 becomes available after 1 more graded submission")
    expect(hints.get_by_role("button")).to_have_count(0)

    _submit(page, wrong + "\n# second try\n", "graded")
    hints = page.locator('#lab-result [data-hints-for="ring-neighbours"]')
    expect(hints).to_contain_text("Hint 1 of 2")
    button = hints.get_by_role("button", name="Show hint 1")
    button.focus()
    page.keyboard.press("Enter")
    revealed = page.locator("#hint-ring-neighbours-0")
    expect(revealed).to_contain_text("The kernel sees each byte and where it went")
    expect(revealed).to_be_focused()  # the button is gone: focus lands on what it revealed
    expect(page.locator('#lab-result [data-hints-for="ring-neighbours"]')).to_contain_text("Hint 2 of 2 becomes")

    page.set_viewport_size({"width": 390, "height": 844})
    expect(revealed).to_be_visible()
    assert _fits(page), "the lab page with a hint is wider than a phone"
    page.set_viewport_size({"width": 1280, "height": 800})

    _submit(page, (RING / "solution.py").read_text(), "graded")
    result = page.locator("#lab-result")
    expect(result.get_by_text("10/10", exact=False).first).to_be_visible()
    result.get_by_role("link", name="Compare with the reference").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Compare with the reference")
    table = page.get_by_role("table", name="beside the reference solution")
    expect(table).to_be_visible()
    expect(table).to_contain_text("def ring_all_reduce")

    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.get_by_role("region", name="beside the reference solution")).to_be_visible()
    assert _fits(page), "the comparison is wider than a phone: its table should scroll inside its frame"

    # With the ring done, the dashboard suggests one next lab, says why, and the path marks the ring done.
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto("/")
    todo = page.get_by_role("region", name="Next lab")
    suggested = todo.locator("[data-lab]").get_attribute("data-lab")
    assert suggested and suggested != "ring-allreduce"
    expect(todo.locator("[data-labs-done]")).to_have_text(f"1 of {LAB_COUNT}")
    title = todo.get_by_role("button").inner_text()
    todo.get_by_role("button", name=title).click()
    expect(page).to_have_url(re.compile(rf"/labs/{suggested}$"))
    expect(page.get_by_role("heading", level=1)).to_contain_text(title)
    page.goto("/labs")
    expect(page.locator('[data-lab="ring-allreduce"]')).to_have_attribute("data-state", "done")
    expect(page.locator(f'[data-lab="{suggested}"]')).to_have_attribute("data-state", "next")
