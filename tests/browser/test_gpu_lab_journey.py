"""A student opens a GPU-only lab on a site whose grading worker has no GPU: the page says so before they
submit, and their submission waits in the queue, saying what it waits for, instead of failing.

The server is `ringlab serve` on SQLite with its embedded worker (the same as the other lab journeys),
which registers with the GPUs this machine has.
"""

from __future__ import annotations

import secrets

import pytest
from playwright.sync_api import Page, expect

torch = pytest.importorskip("torch")
GPU_LAB = "gpu-memory-profile"


def test_a_gpu_lab_says_no_gpu_worker_is_connected_and_the_submission_waits(page: Page) -> None:
    page.goto("/signup")
    page.get_by_label("Username").fill(f"gpu{secrets.token_hex(3)}")
    page.get_by_label("Password").fill("a-long-password-1")
    page.get_by_role("button", name="Sign up").click()
    page.wait_for_url("**/")

    page.goto("/labs")
    if torch.cuda.is_available():  # the embedded worker has this machine's GPU: it is connected
        expect(page.locator(f'article[data-lab="{GPU_LAB}"]').get_by_test_id("gpu-worker")).to_have_text(
            "needs a GPU worker"
        )
        return
    card = page.locator(f'article[data-lab="{GPU_LAB}"]')
    expect(card.get_by_test_id("gpu-worker")).to_have_text("needs a GPU worker; none is connected")
    card.get_by_role("heading").get_by_role("link").click()  # the card also links to the labs to do first
    expect(page.get_by_test_id("gpu-worker")).to_contain_text("needs a GPU worker; none is connected")

    page.get_by_role("button", name="Submit").click()
    result = page.locator("#lab-result")
    expect(result).to_have_attribute("data-status", "queued")
    expect(result.get_by_test_id("gpu-wait")).to_contain_text("it waits for a GPU worker, and none is connected now")
    # Asked about again, held 10 s (no worker can take it, so nothing will change).
    with page.expect_response(lambda r: "/labs/submissions/" in r.url):
        pass
    expect(result).to_have_attribute("data-status", "queued")
    expect(result.get_by_test_id("gpu-wait")).to_be_visible()
