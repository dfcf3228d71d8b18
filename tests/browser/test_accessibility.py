"""Every main page, student's and instructor's, in both themes, passes axe-core's WCAG 2.1 A and AA rules.

axe-core comes from npm (package.json) and is read from node_modules/ by this test only: the app
never serves it, and the pages' CSP allows no script but the app's own, so the browser context
bypasses the CSP and adds it to every page it opens, as an init script (handed to the browser once,
not sent over again for each page checked). Each page is checked against every rule in the light
theme, then the student's own "Dark theme" button switches it and the rules that depend on colour
run again: the other rules read the markup, which the theme does not change. Reduced motion is on,
as Pico then drops its transitions, so no colour is measured halfway through the switch.

The data the pages show (a quiz in progress and a submitted one, a solved exercise part, a lab
submission the server's worker grades) is made once through the JSON API; a wrong answer, a
revealed card and a saved choice are made in the page, as a student does.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from app.content.loader import load_tree
from tests.browser.conftest import ADMIN, ARTIFACTS, INSTRUCTOR, REPO
from tests.conftest import CONTENT_DIR

pytestmark = pytest.mark.browser

AXE = REPO / "node_modules" / "axe-core" / "axe.min.js"
TAGS = ["wcag2a", "wcag2aa", "wcag21a", "wcag21aa"]
# The WCAG rules whose outcome depends on the colours, so on the theme (the rest read the markup).
COLOUR_RULES = ["color-contrast", "link-in-text-block"]
PASSWORD = "a-long-password-1"
SET, EXERCISE, DECK, LAB = "ch26-exercises", "ex-26-1", "mire-dis-train", "ring-allreduce"
# Swagger UI renders /api/docs from the OpenAPI document with its own markup (collapsible
# operations, its copy buttons and colours): checked here are the page around it and our header.
SWAGGER_UI = ".swagger-ui"
# Findings checked and accepted, by rule and element. CodeMirror's scroller is not in the tab order
# (CodeMirror gives it tabindex=-1): the keyboard reaches the editor through its input, which has
# the focus and scrolls the scroller with the cursor, and the plain-textarea toggle sits beside it.
ACCEPTED = {("scrollable-region-focusable", ".CodeMirror-scroll")}


@dataclass(frozen=True)
class Student:
    name: str
    in_progress: int  # an attempt at Module 202, one question answered
    submitted: int  # a submitted attempt at the Chapter 35 quiz, some answers right, some wrong
    submission: int  # a graded ring all-reduce submission


def _make_student(server: str) -> Student:
    quizzes = {q.id: q for q in load_tree(CONTENT_DIR).quizzes}
    name = f"axe{secrets.token_hex(3)}"
    with httpx.Client(base_url=server, timeout=30) as api:
        body = {"username": name, "password": PASSWORD}
        assert api.post("/api/v1/auth/register", json=body).status_code == 201
        token = api.post("/api/v1/auth/token", json=body).json()["access_token"]
        auth = {"Authorization": f"Bearer {token}"}
        code = (CONTENT_DIR / "labs" / LAB / "solution.py").read_text()
        submission = api.post(f"/api/v1/labs/{LAB}/submissions", json={"code": code}, headers=auth).json()["id"]

        done = api.post("/api/v1/quizzes/ch35-quiz/attempts", headers=auth).json()
        for n, q in enumerate(quizzes["ch35-quiz"].questions):
            # Wrong on every third and on q11, which no card teaches (its result offers "Make a card").
            wrong = n % 3 == 0 or q.id == "ch35-q11"
            choice = next(o.key for o in q.options if o.key != q.answer) if wrong else q.answer
            api.put(f"/api/v1/attempts/{done['id']}/answers/{q.id}", json={"choice": choice}, headers=auth)
        assert api.post(f"/api/v1/attempts/{done['id']}/submit", headers=auth).status_code == 200
        going = api.post("/api/v1/quizzes/module-202/attempts", headers=auth).json()
        first = going["questions"][0]["id"]
        api.put(f"/api/v1/attempts/{going['id']}/answers/{first}", json={"choice": "A"}, headers=auth)

        answer = f"/api/v1/exercises/{EXERCISE}/parts/a-global-batch/answer"
        assert api.post(answer, json={"value": "2048"}, headers=auth).json()["correct"]
    return Student(name, going["id"], done["id"], submission)


@pytest.fixture(scope="module")
def student(server: str) -> Student:
    return _make_student(server)


def _violations(page: Page, exclude: str | None = None, *, colours_only: bool = False) -> list[dict[str, Any]]:
    assert page.evaluate("typeof window.axe === 'object'"), f"axe-core is not loaded in {page.url}"
    context = "document" if exclude is None else f"{{exclude: [{exclude!r}]}}"
    run_only = f"{{type: 'rule', values: {COLOUR_RULES!r}}}" if colours_only else f"{{type: 'tag', values: {TAGS!r}}}"
    # resultTypes: only violations are listed in full, which makes a run on a long page quicker.
    options = f"{{runOnly: {run_only}, resultTypes: ['violations']}}"
    violations = page.evaluate(f"axe.run({context}, {options}).then(r => r.violations)")
    for v in violations:
        v["nodes"] = [n for n in v["nodes"] if (v["id"], str(n["target"][-1])) not in ACCEPTED]
    return [v for v in violations if v["nodes"]]


def _describe(where: str, violations: list[dict[str, Any]]) -> list[str]:
    """One line per rule broken on a page: the rule, its impact, where (the first few elements) and why."""
    lines = []
    for v in violations:
        nodes = v["nodes"]
        targets = ", ".join(" ".join(str(t) for t in n["target"]) for n in nodes[:4])
        more = f" and {len(nodes) - 4} more" if len(nodes) > 4 else ""
        why = " ".join((nodes[0].get("failureSummary") or v["help"]).split())
        lines.append(f"{where}: {v['id']} ({v['impact']}), {len(nodes)}x at {targets}{more}: {why[:220]}")
    return lines


def _switch_theme(page: Page, theme: str) -> None:
    """Press the page's own theme button, as a student does, and wait until the page shows `theme`."""
    toggle = page.get_by_role("button", name="Dark theme")
    toggle.click()
    expect(toggle).to_have_attribute("aria-pressed", "true" if theme == "dark" else "false")
    assert page.evaluate("document.documentElement.getAttribute('data-theme')") == theme


class Checker:
    """Runs axe on each page a journey reaches, in both themes, and keeps every violation to report them all at once."""

    def __init__(self, page: Page):
        self.page = page
        self.found: list[str] = []
        self.visited: list[str] = []

    def check(self, label: str, *, exclude: str | None = None, themed: bool = True) -> None:
        page = self.page
        page.wait_for_load_state("load")
        self.visited.append(label)
        if not themed:
            self.found += _describe(f"{label} ({page.url})", _violations(page, exclude))
            return
        assert page.evaluate("document.documentElement.getAttribute('data-theme')") == "light"
        expect(page.get_by_role("button", name="Dark theme")).to_have_attribute("aria-pressed", "false")
        self.found += _describe(f"[light] {label} ({page.url})", _violations(page, exclude))
        _switch_theme(page, "dark")
        self.found += _describe(f"[dark] {label} ({page.url})", _violations(page, exclude, colours_only=True))
        _switch_theme(page, "light")

    def visit(self, path: str, label: str, *, exclude: str | None = None, themed: bool = True) -> None:
        self.page.goto(path)
        self.check(label, exclude=exclude, themed=themed)


@pytest.fixture
def context(browser: Browser, server: str) -> Iterator[BrowserContext]:
    if not AXE.exists():
        pytest.fail(f"{AXE.relative_to(REPO)} is missing: scripts/setup.sh test installs it (npm ci).")
    # The system's preference and the choice theme.js remembers agree: every page opens light.
    context = browser.new_context(base_url=server, bypass_csp=True, color_scheme="light", reduced_motion="reduce")
    context.add_init_script("try { localStorage.setItem('ringlab-theme', 'light') } catch (e) {}")
    context.add_init_script(path=str(AXE))
    yield context
    context.close()


def _sign_in(page: Page, username: str, password: str) -> None:
    page.goto("/signin")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/(instructor)?$"))  # staff land on the instructor home


def _sign_out(page: Page) -> None:
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_role("link", name="Sign in")).to_be_visible()


def _student_pages(c: Checker, student: Student) -> None:
    page = c.page
    c.visit("/", "home, signed out")
    c.visit("/signin", "sign in")
    c.visit("/signup", "sign up")
    c.visit("/no-such-page", "404")
    c.visit("/help", "help")
    # Swagger UI has a light theme only: the page does not load theme.js.
    c.visit("/api/docs", "API docs", exclude=SWAGGER_UI, themed=False)
    _sign_in(page, student.name, PASSWORD)
    c.check("dashboard")

    c.visit("/quizzes", "quizzes")
    c.visit("/quizzes/ch35-quiz", "quiz intro with a past attempt")
    page.goto(f"/quizzes/attempts/{student.in_progress}")
    page.locator("form.answer-form input[type=radio]").nth(1).check()
    expect(page.locator(".saved-status")).to_have_text("Saved.")
    c.check("quiz attempt, an answer saved")
    c.visit(f"/quizzes/attempts/{student.in_progress}/finish", "quiz attempt, review before submitting")
    c.visit(f"/quizzes/attempts/{student.submitted}/result", "quiz result")
    report = page.locator(".report-problem").first
    report.locator("summary").click()
    report.get_by_role("textbox").fill("The explanation names the wrong collective.")
    report.get_by_role("button", name="Send report").click()
    expect(page.locator(".report-sent")).to_be_focused()
    page.locator("[data-make-card]").first.click()
    expect(page.locator("[data-made-card]")).to_be_focused()
    c.check("quiz result, a problem reported and a card made")
    page.get_by_role("button", name=re.compile(r"Study these \d+ cards? now")).click()
    expect(page.locator("#reviewer")).to_be_visible()
    c.check("missed questions' cards")
    c.visit("/reports", "my reports")
    page.locator("main a[href^='/reports/']").first.click()
    c.check("a report")

    c.visit("/exercises", "exercise sets and labs")
    c.visit(f"/exercises/{SET}", "exercise set")
    c.visit(f"/exercises/{SET}/{EXERCISE}", "exercise, a part solved")
    part = page.locator("#part-a-sync-steps")
    part.get_by_label(re.compile("Your answer")).fill("600")
    part.get_by_role("button", name="Check").click()
    expect(part.get_by_text(re.compile("Not quite"))).to_be_visible()
    part.get_by_label(re.compile("Your answer")).fill("601")
    part.get_by_role("button", name="Check").click()
    part.get_by_role("button", name="Show a hint").click()
    expect(page.locator("#hint-a-sync-steps")).to_be_focused()
    part = page.locator("#part-b-allreduce-time")
    part.get_by_label(re.compile("Your answer")).fill("many")
    part.get_by_role("button", name="Check").click()
    expect(part.get_by_role("alert")).to_be_visible()
    c.check("exercise, wrong answers with a hint, and a malformed answer")

    c.visit("/flashcards", "decks")
    c.visit(f"/flashcards/{DECK}/study", "study, the front")
    page.get_by_role("button", name=re.compile("Show answer")).click()
    expect(page.locator("#reviewer .answer")).to_be_visible()
    c.check("study, the answer and the ratings")
    c.visit(f"/flashcards/{DECK}", "deck browse")
    c.visit("/flashcards/mine", "my own cards")
    c.visit("/flashcards/mine/study", "study my own cards")
    c.visit(f"/flashcards/{DECK}/cards/mdt-001", "card")
    c.visit(f"/flashcards/{DECK}/stats", "deck statistics")
    c.visit("/flashcards/settings", "settings")

    c.visit("/labs", "labs")
    c.visit(f"/labs/{LAB}", "lab")
    page.goto(f"/labs/submissions/{student.submission}")
    # Graded by the server's embedded worker while the pages above were checked; the page polls.
    expect(page.locator("#lab-result")).to_have_attribute("data-status", "graded", timeout=240_000)
    c.check("lab submission, graded")
    c.visit("/account/password", "change your password")
    c.visit("/courses", "your courses")
    page.get_by_label("Join code").fill("NOTACODE")
    page.get_by_role("button", name="Join the course").click()
    expect(page.get_by_label("Join code")).to_have_attribute("aria-invalid", "true")
    c.check("your courses, a wrong join code")
    _sign_out(page)


def _instructor_pages(c: Checker, student: Student) -> None:
    page = c.page
    _sign_in(page, *INSTRUCTOR)
    c.visit("/instructor", "instructor")
    c.visit("/instructor/gradebook", "gradebook")
    page.locator(f'tr[data-student="{student.name}"]').get_by_role("link", name=student.name).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(student.name)
    c.check("a student")
    extensions = page.get_by_role("region", name="Extensions")
    extensions.get_by_label("Assessment").select_option("quiz:module-202")
    extensions.get_by_label("Reason").fill("a family emergency")
    extensions.get_by_role("button", name="Grant the extension").click()  # neither a date nor attempts
    expect(page.locator("#extension-error")).to_be_visible()
    c.check("a student, an extension refused")
    page.get_by_role("region", name="Extensions").get_by_label("Extra attempts").fill("1")
    page.get_by_role("region", name="Extensions").get_by_role("button", name="Grant the extension").click()
    expect(page.get_by_test_id("extensions")).to_contain_text("a family emergency")
    c.check("a student, an extension granted")
    page.get_by_role("button", name="Make a password reset link").click()
    link = page.get_by_label("The link").input_value()
    c.check("a password reset link")
    c.visit(urlsplit(link).path, "a password reset form")
    c.visit(f"/instructor/attempts/{student.submitted}", "a student's attempt")
    c.visit(f"/labs/submissions/{student.submission}", "a student's lab submission")
    c.visit(f"/labs/{LAB}/all", "a lab's submissions")
    c.visit(f"/labs/{LAB}/reference", "the reference beside a submission")
    c.visit("/instructor/reports?state=all", "problem reports")
    page.locator("main a[href^='/instructor/reports/']").first.click()
    c.check("a problem report")
    c.visit("/quizzes/ch35-quiz/statistics", "quiz statistics")
    c.visit("/instructor/course", "course settings")
    _sign_out(page)


def _admin_pages(c: Checker, student: Student) -> None:
    page = c.page
    _sign_in(page, *ADMIN)
    c.visit("/admin/users", "accounts")
    c.visit(f"/admin/users?q={student.name}", "accounts, filtered")
    page.get_by_role("link", name=re.compile(f"Delete {student.name}")).first.click()
    expect(page.get_by_role("heading", level=1)).to_contain_text(student.name)
    c.check("delete an account: the confirmation")
    c.visit("/courses", "every course")


def test_every_page_passes_axe_in_both_themes(context: BrowserContext, student: Student) -> None:
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    checker = Checker(page)
    try:
        _student_pages(checker, student)
        _instructor_pages(checker, student)
        _admin_pages(checker, student)
    except Exception:
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "accessibility.png"), full_page=True)
        raise
    assert not checker.found, f"{len(checker.found)} accessibility violations:\n" + "\n".join(checker.found)
    assert not errors, errors
    assert len(checker.visited) >= 30, checker.visited


# States the journey above does not reach (a late submission, a flagged question, a partly passed
# check, a timer about to run out, every card state and rating), each in the markup its template writes.
SWATCHES = {
    "/quizzes/ch35-quiz": """
        <p>Submitted 3 May · <strong class="badge badge-late">late</strong> (after the due date)</p>
        <div class="countdown is-low"><span>Time left</span> <strong>04:59</strong></div>
        <p class="verdict pass">Passed</p>
        <p class="verdict fail">Not passed <span class="meta">(pass mark 18/25)</span></p>
        <article class="review wrong">
          <header><span class="meta">Question 1</span><span class="badge">Wrong</span></header>
          <ul class="review-options">
            <li class="is-choice"><span class="option-key">A</span> One <em class="tag">your answer</em></li>
            <li class="is-answer"><span class="option-key">B</span> Two <em class="tag">right answer</em></li>
          </ul>
        </article>
        <article class="review right">
          <header><span class="meta">Question 2</span><span class="badge">Correct</span></header>
          <ul class="review-options">
            <li class="is-answer is-choice"><span class="option-key">C</span> Three
              <em class="tag">your answer</em> <em class="tag">right answer</em></li>
          </ul>
        </article>
        <table><tbody><tr class="flagged"><td>Q3</td><td><span class="flag">⚑ too hard</span></td></tr></tbody></table>
    """,
    "/labs": """
        <p><strong class="badge badge-graded">passed 10/10</strong>
          <strong class="badge badge-graded badge-partial">best 6/10</strong>
          <strong class="badge badge-failed">failed</strong> <strong class="badge badge-error">error</strong>
          <span class="badge badge-late">late</span></p>
        <table class="lab-checks"><tbody>
          <tr class="pass"><td><span class="ok">✓ pass</span></td></tr>
          <tr><td><span class="part">◐ partly</span></td></tr>
          <tr class="fail"><td><span class="ko">✗ fail</span></td></tr>
        </tbody></table>
    """,
    "/flashcards": """
        <p class="counts"><span class="count count-new"><span class="count-label">New</span> <b>20</b></span>
          <span class="count count-learning"><span class="count-label">Learning</span> <b>3</b></span>
          <span class="count count-review"><span class="count-label">Review</span> <b>7</b></span></p>
        <p>#12 <span class="state-badge state-new">new</span>
          <span class="state-badge state-learning">learning</span>
          <span class="state-badge state-relearning">relearning</span>
          <span class="state-badge state-review">review</span>
          <span class="state-badge state-suspended">suspended</span></p>
        <div class="rating-buttons">"""
    + "".join(
        f'<button type="button" class="rate rate-{n}"><span class="interval">10m</span>'
        f'<span class="rate-name"><kbd>{n}</kbd> {name}</span><span class="rate-hint">hint</span></button>'
        for n, name in enumerate(["Again", "Again", "Hard", "Good", "Easy"], start=1)
    )
    + "</div>",
    f"/exercises/{SET}": """
        <p class="badges"><span class="badge badge-todo">6 parts</span>
          <span class="badge badge-partial">1/6 parts solved</span>
          <span class="badge badge-complete">6/6 parts solved</span> <span class="badge badge-done">done</span>
          <span class="badge badge-lab">lab</span> <span class="stars">★★★</span></p>
    """,
}


def test_status_colours_pass_contrast_on_the_page_and_on_a_card(context: BrowserContext) -> None:
    page = context.new_page()
    found = []
    for path, html in SWATCHES.items():
        page.goto(path)
        # Once on the page's background, once in a card (Pico's lighter <article> in the dark theme).
        page.evaluate(
            "html => document.querySelector('main').insertAdjacentHTML('afterbegin',"
            " `<section id=swatches>${html}<article>${html}</article></section>`)",
            html,
        )
        for theme in ("light", "dark"):
            if theme == "dark":
                _switch_theme(page, "dark")
            violations = page.evaluate("axe.run('#swatches', {runOnly: ['color-contrast']}).then(r => r.violations)")
            found += _describe(f"[{theme}] {path}", violations)
        _switch_theme(page, "light")
    assert not found, "\n".join(found)
