"""An instructor runs the class: gradebook, a student's page, a submission, a re-grade, the CSV.

A student first works through the JSON API (a graded ring all-reduce submission, a quiz attempt),
graded for real by the server's embedded worker. Screenshots of each screen go to test-artifacts/.
"""

from __future__ import annotations

import csv
import io
import re
import secrets
import time

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ARTIFACTS, INSTRUCTOR
from tests.browser.pictures import picture
from tests.conftest import CONTENT_DIR

pytestmark = pytest.mark.browser


def student_works(server: str) -> str:
    """A new student, through the API: a correct ring all-reduce (graded) and a submitted quiz attempt."""
    import httpx

    name = f"kim{secrets.token_hex(3)}"
    with httpx.Client(base_url=server, timeout=30) as api:
        body = {"username": name, "password": "a-long-password-1"}
        assert api.post("/api/v1/auth/register", json=body).status_code == 201
        token = api.post("/api/v1/auth/token", json=body).json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        attempt = api.post("/api/v1/quizzes/ch35-quiz/attempts", headers=headers).json()
        first = attempt["questions"][0]
        api.put(f"/api/v1/attempts/{attempt['id']}/answers/{first['id']}", json={"choice": "A"}, headers=headers)
        assert api.post(f"/api/v1/attempts/{attempt['id']}/submit", headers=headers).status_code == 200
        code = (CONTENT_DIR / "labs" / "ring-allreduce" / "solution.py").read_text()
        sid = api.post("/api/v1/labs/ring-allreduce/submissions", json={"code": code}, headers=headers).json()["id"]
        deadline = time.monotonic() + 90
        while api.get(f"/api/v1/submissions/{sid}", headers=headers).json()["status"] != "graded":
            assert time.monotonic() < deadline, "the embedded worker did not grade the submission"
            time.sleep(0.3)
    return name


def shot(page: Page, name: str) -> None:
    picture(page, ARTIFACTS / f"instructor-{name}.png")


def test_an_instructor_reviews_a_student_regrades_a_lab_and_downloads_the_gradebook(page: Page, server: str) -> None:
    student = student_works(server)
    page.goto("/signin")
    page.get_by_label("Username").fill(INSTRUCTOR[0])
    page.get_by_label("Password").fill(INSTRUCTOR[1])
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Instructor").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Instructor")
    expect(page.locator('[data-figure="submissions-today"]')).not_to_have_text("0")
    shot(page, "1-home")

    # The gradebook: filter by name as you type (no reload), then open the student's page.
    page.get_by_role("button", name="Gradebook", exact=True).click()  # a link styled as a button
    expect(page.get_by_role("heading", level=1)).to_have_text("Gradebook")
    page.evaluate("window.__stays = 'same page'")
    page.get_by_label("Student").fill("nobody-by-this-name")
    expect(page.get_by_test_id("gradebook-count")).to_contain_text("0 students matching")
    expect(page.locator("tr[data-student]")).to_have_count(0)
    page.get_by_label("Student").fill(student[:5])
    row = page.locator(f'tr[data-student="{student}"]')
    expect(row).to_be_visible()
    expect(page.locator("tr[data-student]")).to_have_count(1)
    expect(row.locator('td[data-column="lab:ring-allreduce"]')).to_contain_text("10/10")
    expect(row.locator('td[data-column="quiz:ch35-quiz"]')).to_contain_text("1 attempt")
    assert page.evaluate("window.__stays") == "same page"
    expect(page).to_have_url(re.compile(rf"q={student[:5]}"))  # the filter is in the address: it survives a reload
    shot(page, "2-gradebook")
    # Scrolled to its last column, the table keeps the student's name in view at its left edge.
    scroller = page.locator("#gradebook-table .overflow-auto")
    assert scroller.evaluate("el => el.scrollWidth > el.clientWidth")  # wider than the page: it scrolls
    scroller.evaluate("el => { el.scrollLeft = el.scrollWidth }")
    name, frame = row.get_by_role("link", name=student).bounding_box(), scroller.bounding_box()
    assert name is not None and frame is not None and frame["x"] <= name["x"] < frame["x"] + 40, (name, frame)
    # Only the labs' columns: ticked, the table is swapped in place and the choice kept in the address.
    page.get_by_role("group", name="Show").get_by_role("checkbox", name="Labs").check()
    expect(page.locator('th[data-column="quiz:ch35-quiz"]')).to_have_count(0)
    expect(row.locator('td[data-column="lab:ring-allreduce"]')).to_contain_text("10/10")
    expect(page).to_have_url(re.compile(r"show=Labs"))
    assert page.evaluate("window.__stays") == "same page"
    row.get_by_role("link", name=student).click()

    # The student's page: the quiz attempt opens read-only with the key; the submission names the student.
    expect(page.get_by_role("heading", level=1)).to_have_text(student)
    expect(page.get_by_text("True retention")).to_be_visible()
    shot(page, "3-student")
    page.get_by_role("link", name="Open").first.click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"{student}'s attempt")
    expect(page.get_by_text("right answer").first).to_be_visible()
    page.go_back()
    page.get_by_test_id("submissions").get_by_role("link").first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(f"{student}'s submission #")
    expect(page.get_by_role("heading", name=f"{student}'s code")).to_be_visible()
    expect(page.get_by_role("button", name="Submit")).to_have_count(0)
    expect(page.get_by_text("Your code")).to_have_count(0)
    shot(page, "4-submission")

    # Re-grade the lab: asked first, told how many jobs, and the table updates as they are graded.
    page.get_by_role("link", name="Ring all-reduce: every submission").click()
    page.get_by_role("button", name="Re-grade all…").click()
    expect(page.get_by_test_id("regrade-count")).to_contain_text(re.compile(r"This queues \d+ jobs?"))
    shot(page, "5-regrade-confirm")
    page.get_by_role("button", name=re.compile(r"Re-grade \d+ submissions?")).click()
    expect(page.get_by_test_id("queued")).to_contain_text(re.compile(r"Queued \d+ jobs? for re-grading"))
    page.evaluate("window.__stays = 'review page'")
    rows = page.locator("#review-rows")
    expect(rows).to_have_attribute("data-in-flight", "0", timeout=90_000)
    expect(rows.locator(f'tr:has-text("{student}")').first).to_have_attribute("data-status", "graded")
    expect(rows.locator(f'tr:has-text("{student}")').first).to_contain_text("re-graded 1×")
    assert page.evaluate("window.__stays") == "review page"  # updated live, not reloaded
    shot(page, "6-regraded")

    # Question statistics: each question's text and options next to its figures, first attempts by default.
    page.goto("/instructor")
    page.get_by_role("link", name="Question statistics").first.click()
    expect(page.get_by_text("each student's first submitted attempt")).to_be_visible()
    expect(page.locator("td.item-text").first).to_contain_text("?")
    page.get_by_role("link", name="All attempts").click()
    expect(page.get_by_text("over every submitted attempt")).to_be_visible()
    shot(page, "7-statistics")

    # The gradebook as CSV.
    page.goto("/instructor/gradebook")
    with page.expect_download() as info:
        page.get_by_role("button", name="Download CSV").click()
    download = info.value
    assert download.suggested_filename == "gradebook.csv"
    path = download.path()
    assert path is not None
    records = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    mine = next(r for r in records if r["student"] == student)
    assert mine["lab:ring-allreduce:best"] == "10" and mine["quiz:ch35-quiz:attempts"] == "1"
