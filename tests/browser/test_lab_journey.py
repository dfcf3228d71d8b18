"""A student signs up, opens the ring all-reduce lab, pastes a solution and watches it graded live.

The server is `ringlab serve` on SQLite, so its embedded worker (a child process, real
bubblewrap sandbox, real torch.distributed ranks) does the grading.
"""

from __future__ import annotations

import secrets

from playwright.sync_api import Page, expect

from tests.conftest import CONTENT_DIR


def test_submit_the_ring_lab_and_see_every_check_pass_without_reloading(page: Page) -> None:
    username = f"lab{secrets.token_hex(3)}"
    page.goto("/signup")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill("a-long-password-1")
    page.get_by_role("button", name="Sign up").click()
    page.wait_for_url("**/")

    page.goto("/exercises")
    page.get_by_role("link", name="Ring all-reduce").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Ring all-reduce")
    marker = page.evaluate("window.__stays = 'same page'")  # a reload would lose it
    assert marker == "same page"

    page.get_by_label("Your code").fill((CONTENT_DIR / "labs" / "ring-allreduce" / "solution.py").read_text())
    page.get_by_role("button", name="Submit").click()
    result = page.locator("#lab-result")
    expect(result).to_have_attribute("data-status", "graded", timeout=60_000)
    expect(result.get_by_text("10/10 points")).to_be_visible()
    rows = result.locator("table.lab-checks tbody tr")
    expect(rows).to_have_count(4)
    expect(result.locator("tr.fail")).to_have_count(0)
    expect(result.get_by_role("heading", name="Bytes sent per rank")).to_be_visible()
    expect(result.locator("table.lab-volume")).to_contain_text("2(N-1)/N")
    expect(page.locator("#lab-history")).to_contain_text("10/10")
    assert page.evaluate("window.__stays") == "same page"
