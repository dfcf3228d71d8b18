"""Two sections of one content tree on one server, side by side, as their people use them in a browser.

The server reads a content directory holding the repository's quizzes, exercises, decks and labs
beside two `courses/<id>/course.yaml` files that assign the same quiz with different due dates and
attempts; it syncs them as it starts. Its staff and section B's join code are made with the `ringlab`
command, as an operator would (in the test process: tests.cli). Screenshots of each screen go to test-artifacts/.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import ARTIFACTS, serve, server_env
from tests.browser.pictures import picture
from tests.cli import ringlab
from tests.conftest import CONTENT_DIR

pytestmark = pytest.mark.browser

A, B = "Distributed training, section A", "Distributed training, section B"
SECTION_A = f"""\
title: {A}
term: Fall 2026
time_zone: Europe/Berlin
quizzes:
  module-202: {{due: 2026-12-01}}
labs: [ring-allreduce]
"""
SECTION_B = f"""\
title: {B}
term: Fall 2026
quizzes:
  module-202: {{due: "2027-01-15T09:00:00+00:00", max_attempts: 1}}
"""
PASSWORD = "a-good-password-1"
A_DUE = "01 Dec 2026, 22:59 UTC"  # the end of 1 December in Berlin (UTC+1 in winter)
B_DUE = "15 Jan 2027, 09:00 UTC"


def _ringlab(env: dict[str, str], *args: str) -> str:
    done = ringlab(*args, env=env)
    assert done.returncode == 0, f"ringlab {' '.join(args)}: {done.stderr}"
    return done.stdout.strip()


@pytest.fixture(scope="module")
def sections(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server running sections A and B; ivy instructs A, tia assists in B. Yields (its URL, B's join code)."""
    root = tmp_path_factory.mktemp("courses-journey")
    content = root / "content"
    content.mkdir()
    for kind in ("quizzes", "exercises", "decks", "labs"):
        (content / kind).symlink_to(CONTENT_DIR / kind)
    for course, text in (("section-a", SECTION_A), ("section-b", SECTION_B)):
        (content / "courses" / course).mkdir(parents=True)
        (content / "courses" / course / "course.yaml").write_text(text)
    data = root / "data"
    data.mkdir()
    extra = {"RINGLAB_CONTENT_DIR": str(content)}
    # The server syncs the content as it starts (RINGLAB_SYNC_CONTENT_ON_START, on by default): the
    # courses exist once it answers, so their staff can be made.
    with serve(data, **extra) as base:
        env = server_env(data, **extra)
        _ringlab(env, "users", "create", "ivy", "--course", "section-a", "--role", "instructor", "--password", PASSWORD)
        _ringlab(env, "users", "create", "tia", "--course", "section-b", "--role", "ta", "--password", PASSWORD)
        code_b = _ringlab(env, "courses", "join-code", "section-b", "--new")
        assert re.fullmatch(r"[A-Z0-9]{8}", code_b), code_b
        yield base, code_b


@pytest.fixture(scope="module")
def server(sections: tuple[str, str]) -> str:
    """This module's server in place of the shared one, for conftest's `page` (console errors, a failure's picture)."""
    return sections[0]


def shot(page: Page, name: str) -> None:
    picture(page, ARTIFACTS / f"sections-{name}.png")


def nav(page: Page, name: str) -> None:
    page.get_by_role("navigation", name="Main").get_by_role("link", name=name, exact=True).click()


def sign_in(page: Page, username: str) -> None:
    page.context.clear_cookies()  # each person on their own computer (a shared one: the test below)
    page.goto("/signin")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("link", name=re.compile(f"signed in as {username}"))).to_be_visible()


def sign_out(page: Page) -> None:
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Sign in")).to_be_visible()


def sign_up(page: Page, prefix: str, code: str) -> str:
    name = f"{prefix}{secrets.token_hex(3)}"
    page.context.clear_cookies()
    page.goto("/signup")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_label("Course join code").fill(code)
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_role("heading", name=f"Welcome, {name}")).to_be_visible()
    return name


def quiz_terms(page: Page, query: str = "") -> tuple[str, str | None]:
    """The due date and the attempts allowed (None: no limit) on the quiz's page, in the student's current course."""
    page.goto(f"/quizzes/module-202{query}")
    expect(page.get_by_role("heading", level=1)).to_be_visible()
    attempts = page.get_by_test_id("attempts-allowed")
    # Once a date is behind us the page adds "(passed: ...)"; the date itself is what is compared.
    due = re.sub(r" \(passed: [^)]*\)$", "", page.get_by_test_id("due").inner_text())
    return due, attempts.inner_text() if attempts.count() else None


def test_two_sections_of_one_content_tree_side_by_side(page: Page, sections: tuple[str, str]) -> None:
    _, code_b = sections

    # ivy, section A's instructor: her courses, then the course's settings, where she makes a join code.
    sign_in(page, "ivy")
    nav(page, "Courses")
    ivys = page.get_by_test_id("course-list")
    expect(ivys.locator("li")).to_have_count(1)
    expect(ivys.locator('li[data-course="section-a"]')).to_contain_text("you are an instructor")
    expect(ivys.locator('li[data-course="section-a"]')).to_contain_text("You are working in it now")
    nav(page, "Instructor")
    page.get_by_role("button", name="Course settings").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(A)
    expect(page.get_by_test_id("course-facts")).to_contain_text("Europe/Berlin")
    expect(page.get_by_test_id("roster").locator('tr[data-member="ivy"]')).to_have_attribute("data-role", "instructor")
    expect(page.get_by_test_id("roster").locator('tr[data-member="tia"]')).to_have_count(0)  # B's, not A's
    page.get_by_role("button", name="New join code").click()
    expect(page.get_by_test_id("notice")).to_have_text(re.compile("A new join code is in force"))
    code_a = page.get_by_test_id("join-code").locator("code").inner_text()
    assert re.fullmatch(r"[A-Z0-9]{8}", code_a) and code_a != code_b, code_a
    shot(page, "1-settings")
    sign_out(page)

    # A student signs up with A's code: the dashboard names section A, the quiz has A's date.
    both = sign_up(page, "cam", code_a)
    expect(page.get_by_test_id("current-course")).to_contain_text(A)
    shot(page, "2-dashboard-a")
    assert quiz_terms(page) == (A_DUE, None)  # A sets no limit on attempts, nor does the quiz

    # A wrong code is refused where it was typed; B's code joins B, and the student works in it at once.
    nav(page, "Courses")
    page.get_by_label("Join code").fill("NOTACODE")
    page.get_by_role("button", name="Join the course").click()
    expect(page.get_by_role("alert")).to_have_text(re.compile("not right. Ask your instructor"))
    expect(page.get_by_label("Join code")).to_be_focused()
    expect(page.get_by_label("Join code")).to_have_attribute("aria-invalid", "true")
    page.get_by_label("Join code").fill(code_b)
    page.get_by_role("button", name="Join the course").click()
    expect(page.get_by_test_id("current-course")).to_contain_text(B)
    nav(page, "Courses")
    courses = page.get_by_test_id("course-list")
    expect(courses.locator("li")).to_have_count(2)
    expect(courses.locator('li[data-course="section-b"]')).to_contain_text("You are working in it now")
    expect(page.get_by_role("button", name=f"Enter {A}")).to_be_visible()
    shot(page, "3-both-courses")
    assert quiz_terms(page) == (B_DUE, "1 (1 left)")  # B allows one attempt
    shot(page, "4-quiz-in-b")
    # Entering A again brings back A's terms: one account, each course's own.
    nav(page, "Courses")
    page.get_by_role("button", name=f"Enter {A}").click()
    expect(page.get_by_test_id("current-course")).to_contain_text(A)
    assert quiz_terms(page) == (A_DUE, None)
    sign_out(page)

    # Another student signs up with A's code only.
    only_a = sign_up(page, "ana", code_a)
    expect(page.get_by_test_id("current-course")).to_contain_text(A)
    nav(page, "Courses")
    expect(page.get_by_test_id("course-list").locator("li")).to_have_count(1)
    sign_out(page)

    # Each course's gradebook has its own students only.
    sign_in(page, "ivy")
    nav(page, "Instructor")
    page.get_by_role("button", name="Gradebook", exact=True).click()
    expect(page.locator(f'tr[data-student="{both}"]')).to_be_visible()
    expect(page.locator(f'tr[data-student="{only_a}"]')).to_be_visible()
    shot(page, "5-gradebook-a")
    sign_out(page)
    sign_in(page, "tia")
    nav(page, "Instructor")
    expect(page.get_by_role("button", name="Course settings")).to_have_count(0)  # not offered to a TA
    page.get_by_role("button", name="Gradebook", exact=True).click()
    expect(page.locator(f'tr[data-student="{both}"]')).to_be_visible()
    expect(page.locator(f'tr[data-student="{only_a}"]')).to_have_count(0)
    shot(page, "6-gradebook-b")
    # A teaching assistant may not change the course: the settings are refused, and the page says why.
    response = page.goto("/instructor/course")
    assert response is not None and response.status == 403
    expect(page.get_by_role("heading", level=1)).to_contain_text("403")
    expect(page.get_by_role("main")).to_contain_text("This page is for the course's instructors.")
    shot(page, "7-ta-refused")

    # tia grants the student in both sections an extension in B, from their page.
    page.go_back()
    page.locator(f'tr[data-student="{both}"]').get_by_role("link", name=both).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(both)
    extensions = page.get_by_role("region", name="Extensions")
    expect(extensions).to_contain_text(f"No extensions: {both} has the course's due dates and attempts.")
    extensions.get_by_label("Assessment").select_option("quiz:module-202")
    extensions.get_by_label("New due date (UTC)").fill("2027-01-22T09:00")
    extensions.get_by_label("Extra attempts").fill("1")
    extensions.get_by_label("Reason").fill("a family emergency")
    extensions.get_by_role("button", name="Grant the extension").click()
    expect(page.get_by_test_id("extension-notice")).to_have_text("Saved: the extension is in force.")
    granted = page.get_by_test_id("extensions").locator("tbody tr")
    expect(granted).to_have_count(1)
    expect(granted).to_contain_text("a family emergency")
    expect(granted).to_contain_text("by tia")
    shot(page, "8-extension")
    sign_out(page)

    # The student sees their own date and attempts in B; in A, the course's own terms stand.
    sign_in(page, both)
    nav(page, "Courses")
    page.get_by_role("button", name=f"Enter {B}").click()
    assert quiz_terms(page) == ("22 Jan 2027, 09:00 UTC (your extension)", "2 (with your extension) (2 left)")
    shot(page, "9-quiz-extended")
    assert quiz_terms(page, "?course=section-a") == (A_DUE, None)


def test_the_next_person_on_a_shared_browser_works_in_their_own_course(page: Page, sections: tuple[str, str]) -> None:
    _, code_b = sections
    # A student in section B joins it with its code (the browser now remembers B), then signs out.
    student = sign_up(page, "lee", code_b)
    nav(page, "Courses")
    page.get_by_label("Join code").fill(code_b)
    page.get_by_role("button", name="Join the course").click()
    expect(page.get_by_test_id("current-course")).to_contain_text(B)
    sign_out(page)
    # ivy, in section A only, signs in on the same browser: she works in A, not in a course she is not in.
    page.goto("/signin")
    page.get_by_label("Username").fill("ivy")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Instructor")
    page.get_by_role("button", name="Course settings").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(A)
    expect(page.get_by_test_id("roster").locator(f'tr[data-member="{student}"]')).to_have_count(0)
