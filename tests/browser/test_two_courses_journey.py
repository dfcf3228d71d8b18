"""Two sections of one content tree on one server, in a real browser: their own due dates and rosters.

The server reads a content directory holding the repository's quizzes, exercises, decks and labs
beside two `courses/<id>/course.yaml` files; its staff are made with the `ringlab` command, as an
operator would. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.browser.conftest import ARTIFACTS, REPO, serve, server_env
from tests.conftest import CONTENT_DIR

pytestmark = pytest.mark.browser

SECTION_A = """\
title: Distributed training, section A
term: Fall 2026
time_zone: Europe/Berlin
quizzes:
  module-202: {due: 2026-12-01}
labs: [ring-allreduce]
"""
SECTION_B = """\
title: Distributed training, section B
term: Fall 2026
quizzes:
  module-202: {due: "2027-01-15T09:00:00+00:00", max_attempts: 1}
"""
PASSWORD = "a-good-password-1"


def _ringlab(env: dict[str, str], *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def sections(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """A server with sections A and B; ivy instructs A, tia assists B. Yields (its URL, B's join code)."""
    root = tmp_path_factory.mktemp("two-courses")
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
    with serve(data, **extra) as base:
        env = server_env(data, **extra)
        _ringlab(env, "users", "create", "ivy", "--course", "section-a", "--role", "instructor", "--password", PASSWORD)
        _ringlab(env, "users", "create", "tia", "--course", "section-b", "--role", "ta", "--password", PASSWORD)
        code_b = _ringlab(env, "courses", "join-code", "section-b", "--new")
        yield base, code_b


@pytest.fixture
def page(browser: Browser, sections: tuple[str, str], request: pytest.FixtureRequest) -> Iterator[Page]:
    context = browser.new_context(base_url=sections[0])
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    yield page
    if getattr(request.node, "rep_call", None) is not None and request.node.rep_call.failed:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / f"{request.node.name}.png"), full_page=True)
    context.close()
    assert not errors, f"browser errors: {errors}"


def shot(page: Page, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"courses-{name}.png"), full_page=True)


def sign_in(page: Page, username: str) -> None:
    page.context.clear_cookies()
    page.goto("/signin")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()


def sign_up(page: Page, prefix: str, code: str) -> str:
    page.context.clear_cookies()
    name = f"{prefix}{secrets.token_hex(3)}"
    page.goto("/signup")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_label("Course join code").fill(code)
    page.get_by_role("button", name="Sign up").click()
    expect(page.get_by_role("heading", name=f"Welcome, {name}")).to_be_visible()
    return name


def enter(page: Page, title: str) -> None:
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Courses").click()
    page.get_by_role("button", name=f"Enter {title}").click()


def test_two_sections_side_by_side(page: Page, sections: tuple[str, str]) -> None:
    _, code_b = sections
    # ivy, section A's instructor, opens its settings and makes a join code.
    sign_in(page, "ivy")
    page.goto("/instructor/course")
    expect(page.get_by_role("heading", level=1)).to_have_text("Distributed training, section A")
    page.get_by_role("button", name="New join code").click()
    code_a = page.get_by_test_id("join-code").locator("code").inner_text()
    assert len(code_a) == 8
    shot(page, "1-settings")

    # A student signs up with A's code: the dashboard names section A; the quiz has A's due date.
    both = sign_up(page, "cam", code_a)
    expect(page.get_by_test_id("current-course")).to_contain_text("section A")
    page.goto("/quizzes/module-202")
    expect(page.get_by_test_id("due")).to_contain_text("01 Dec 2026, 22:59 UTC")  # the day's end in Berlin
    # ... joins section B with its code, and enters it: B's date and its one attempt.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Courses").click()
    page.get_by_label("Join code").fill(code_b)
    page.get_by_role("button", name="Join the course").click()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Courses").click()
    courses = page.get_by_test_id("course-list")
    expect(courses.locator("li")).to_have_count(2)
    expect(courses.locator('li[data-course="section-b"]')).to_contain_text("You are working in it now")  # joined
    expect(page.get_by_role("button", name="Enter Distributed training, section A")).to_be_visible()
    shot(page, "2-both-courses")
    page.goto("/quizzes/module-202")
    expect(page.get_by_test_id("due")).to_contain_text("15 Jan 2027, 09:00 UTC")
    expect(page.get_by_test_id("attempts-allowed")).to_contain_text("1")
    shot(page, "3-quiz-in-b")

    only_a = sign_up(page, "ana", code_a)

    # Each course's gradebook has its own students only.
    sign_in(page, "ivy")
    page.goto("/instructor/gradebook")
    expect(page.locator(f'tr[data-student="{both}"]')).to_be_visible()
    expect(page.locator(f'tr[data-student="{only_a}"]')).to_be_visible()
    sign_in(page, "tia")
    page.goto("/instructor/gradebook")
    expect(page.locator(f'tr[data-student="{both}"]')).to_be_visible()
    expect(page.locator(f'tr[data-student="{only_a}"]')).to_have_count(0)
    shot(page, "4-gradebook-b")
    # A teaching assistant may not change the course.
    response = page.goto("/instructor/course")
    assert response is not None and response.status == 403

    # tia grants the student in both an extension in section B, from their page.
    page.goto("/instructor/gradebook")
    page.locator(f'tr[data-student="{both}"]').get_by_role("link", name=both).click()
    form = page.locator("#extensions form")
    form.get_by_label("Assessment").select_option("quiz:module-202")
    form.get_by_label("New due date (UTC)").fill("2027-01-22T09:00")
    form.get_by_label("Extra attempts").fill("1")
    form.get_by_label("Reason").fill("a family emergency")
    form.get_by_role("button", name="Grant the extension").click()
    expect(page.get_by_test_id("extensions")).to_contain_text("a family emergency")
    shot(page, "5-extension")

    # The student sees their own date and attempts in B; section A is untouched.
    sign_in(page, both)
    enter(page, "Distributed training, section B")
    page.goto("/quizzes/module-202")
    expect(page.get_by_test_id("due")).to_contain_text("22 Jan 2027, 09:00 UTC (your extension)")
    expect(page.get_by_test_id("attempts-allowed")).to_contain_text("2")
    page.goto("/quizzes/module-202?course=section-a")
    expect(page.get_by_test_id("due")).to_contain_text("01 Dec 2026, 22:59 UTC")
    expect(page.get_by_test_id("due")).not_to_contain_text("your extension")
