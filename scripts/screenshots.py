"""Take the docs' screenshots from the running app: docs/img/home.png, study.png, result.png, gradebook.png.

It starts ``ringlab serve`` (the command ``scripts/run.sh`` ends with) on a free local port and a fresh
SQLite database in a temporary data directory, so its embedded grading worker grades the lab
submissions for real, in the sandbox. ``ringlab users create`` makes an instructor and four students.
Chromium (Debian's, driven by Playwright at 1280x800) then signs the student ``amara`` in, takes the
Chapter 35 quiz (12 of 15 right), rates six new flashcards and reveals the seventh card's answer
(``study.png``), passes the collectives-p2p lab with its reference solution, submits the ring
all-reduce lab that follows it with one mistake, its ``through_rank_zero`` mutant (right sums gathered
at rank 0, so no ring: 2 of the 4 checks fail, and the "who sent what to whom" picture shows the star
beside the reference's ring; ``result.png``, the result section of the submission's page), and opens
her dashboard (``home.png``). Three more students take the quiz and submit collectives-p2p (right, with
one mistake, or both in turn) through the JSON API, and the instructor opens the gradebook with its
columns (``gradebook.png``; quizzes come first, then labs).

Names, answers, ratings and code are fixed, so a run gives the same pages; only the times shown
(dates, seconds to grade) change. It needs what ``scripts/test.sh`` installs (``chromium``,
``bubblewrap``, the ``dev`` and ``worker`` extras)::

    .venv/bin/python scripts/screenshots.py
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import yaml
from playwright.sync_api import Browser, Page, expect, sync_playwright

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # run as a script: the project's packages come from the checkout

from labs.spec import load_lab, mutants  # noqa: E402

OUT = REPO / "docs" / "img"
CHROMIUM = os.environ.get("RINGLAB_CHROMIUM", "/usr/bin/chromium")
LABS = REPO / "content" / "labs"
QUIZ, DECK = "ch35-quiz", "mire-dis-train"
FIRST, RING = "collectives-p2p", "ring-allreduce"  # the ring lab comes after the first one (its `after:`)
PASSWORD = "a-long-password-1"
INSTRUCTOR = "prof"
STUDENT = "amara"  # the one whose screens are shown
MISSED = (3, 8, 12)  # the questions (by number in the content file) amara answers wrongly: 12/15
# Hard or Good, never Again: no card comes back within the run, so the seventh new card is the one shown.
RATINGS = ("3", "4", "4", "3", "4", "4")
# The rest of the class, through the API: how many quiz questions each gets right, and what each submits
# to the first lab, in order ("solution", or a mutant of it).
CLASS: dict[str, tuple[int, tuple[str, ...]]] = {
    "bruno": (14, ("solution",)),
    "chen": (9, ("gather_in_arrival_order",)),
    "dana": (11, ("reduce_to_rank_zero", "solution")),
}
GRADING_S = 300  # the first submission also warms the worker up


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serve(data: Path) -> Iterator[str]:
    """``ringlab serve`` with its own database in ``data``, its users made first; yields its base URL."""
    env = {**os.environ, "RINGLAB_DATA_DIR": str(data)}
    env.pop("DATABASE_URL", None)  # the embedded SQLite database, whatever this shell points at
    ringlab = [sys.executable, "-m", "app"]
    subprocess.run([*ringlab, "db", "upgrade"], cwd=REPO, env=env, check=True, capture_output=True)
    users = [[INSTRUCTOR, "--role", "instructor"], [STUDENT], *([name] for name in CLASS)]
    for user in users:
        subprocess.run([*ringlab, "users", "create", *user, "--password", PASSWORD], cwd=REPO, env=env, check=True,
                       capture_output=True)  # fmt: skip
    port = _free_port()
    log_path = data / "server.log"
    with log_path.open("w") as log:
        proc = subprocess.Popen([*ringlab, "serve", "--port", str(port)], cwd=REPO, env=env, stdout=log, stderr=log)
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while not _healthy(base):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"the server did not start:\n{log_path.read_text()}")
                time.sleep(0.3)
            yield base
        finally:
            proc.terminate()
            proc.wait(timeout=30)


def _healthy(base: str) -> bool:
    try:
        with urllib.request.urlopen(base + "/healthz", timeout=2) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def answer_key() -> list[tuple[str, str, list[str]]]:
    """The quiz's questions in the content file's order: (id, right option, every option)."""
    quiz = yaml.safe_load((REPO / "content" / "quizzes" / f"{QUIZ}.yaml").read_text())
    return [(q["id"], q["answer"], list(q["options"])) for q in quiz["questions"]]


def choice(key: list[tuple[str, str, list[str]]], question_id: str, right: bool) -> str:
    number = [qid for qid, _, _ in key].index(question_id)
    _, answer, options = key[number]
    return answer if right else next(o for o in options if o != answer)


def lab_code(lab: str, name: str) -> str:
    """A lab's reference solution, or the named mutant of it (the solution with one mistake applied)."""
    if name == "solution":
        return (LABS / lab / "solution.py").read_text()
    return next(m.code for m in mutants.load(load_lab(LABS / lab)) if m.name == name)


def class_works(base: str, key: list[tuple[str, str, list[str]]]) -> None:
    """The other students take the quiz and submit the first lab through the JSON API, each graded in turn.

    A student has one submission in the queue at a time (the server answers 409 to a second), and the one
    worker grades one at a time anyway: each submission is waited for before the next.
    """
    for name, (right, codes) in CLASS.items():
        with httpx.Client(base_url=base, timeout=60) as api:
            body = {"username": name, "password": PASSWORD}
            token = api.post("/api/v1/auth/token", json=body).raise_for_status().json()["access_token"]
            api.headers["Authorization"] = f"Bearer {token}"
            attempt = api.post(f"/api/v1/quizzes/{QUIZ}/attempts").raise_for_status().json()
            for n, (qid, _, _) in enumerate(key):
                answer = {"choice": choice(key, qid, n < right)}
                api.put(f"/api/v1/attempts/{attempt['id']}/answers/{qid}", json=answer).raise_for_status()
            api.post(f"/api/v1/attempts/{attempt['id']}/submit").raise_for_status()
            for code in codes:
                submitted = api.post(f"/api/v1/labs/{FIRST}/submissions", json={"code": lab_code(FIRST, code)})
                wait_graded(api, int(submitted.raise_for_status().json()["id"]))


def wait_graded(api: httpx.Client, sid: int) -> None:
    deadline = time.monotonic() + GRADING_S
    while (status := api.get(f"/api/v1/submissions/{sid}").json()["status"]) not in {"graded", "failed", "error"}:
        if time.monotonic() > deadline:
            raise RuntimeError(f"submission {sid} was not graded in {GRADING_S} s (status {status})")
        time.sleep(0.5)


def sign_in(page: Page, name: str) -> None:
    page.goto("/signin")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(lambda url: "/signin" not in url)  # to the dashboard, or the Instructor page


def take_quiz(page: Page, key: list[tuple[str, str, list[str]]]) -> None:
    page.goto(f"/quizzes/{QUIZ}")
    page.get_by_role("button", name="Start the quiz").click()
    total = len(key)
    for n in range(1, total + 1):
        expect(page.get_by_text(f"Question {n} of {total}", exact=False).first).to_be_visible()
        qid = page.locator("form.answer-form").get_attribute("data-question-id") or ""
        right = [q for q, _, _ in key].index(qid) + 1 not in MISSED
        page.locator(f"form.answer-form input[value='{choice(key, qid, right)}']").check()
        expect(page.get_by_role("navigation", name="Questions").get_by_text(f"{n} of {total} answered")).to_be_visible()
        page.get_by_role("button", name="Next →" if n < total else "Review and submit →").click()
    page.get_by_role("button", name="Submit attempt").click()
    expect(page.get_by_role("heading", name="Your result")).to_be_visible()


def study(page: Page) -> None:
    """Rate six new cards, then reveal the seventh card's answer and leave it on screen, scrolled to the deck's menu."""
    page.goto(f"/flashcards/{DECK}/study")
    reviewer = page.locator("#reviewer")
    for digit in RATINGS:
        card = reviewer.locator(".study-card").get_attribute("data-card-id") or ""
        page.keyboard.press("Space")
        expect(reviewer.locator(".answer")).to_be_visible()
        page.keyboard.press(digit)
        expect(reviewer.locator(".study-card")).not_to_have_attribute("data-card-id", card)
    page.keyboard.press("Space")
    expect(reviewer.get_by_role("button", name="Good")).to_be_visible()
    page.locator("nav.deck-nav").evaluate("e => window.scrollTo(0, e.getBoundingClientRect().top + window.scrollY - 8)")


def submit_lab(page: Page, lab: str, code: str) -> None:
    """Paste ``code`` into the lab's editor, submit it, wait for the grade and open the submission's page."""
    page.goto(f"/labs/{lab}")
    page.locator(".CodeMirror-lines").click()
    page.keyboard.press("Control+A")
    page.keyboard.insert_text(code)  # as a paste: no auto-indent
    page.get_by_role("button", name="Submit").click()
    result = page.locator("#lab-result")
    expect(result).to_have_attribute("data-status", "graded", timeout=GRADING_S * 1000)
    number = result.locator("h2").inner_text().rsplit("#", 1)[-1]
    page.goto(f"/labs/submissions/{number}")


def shoot(page: Page, name: str, **options: Any) -> None:
    page.mouse.move(0, 0)  # no hover styles
    page.evaluate("document.activeElement && document.activeElement.blur()")  # no focus rings
    page.wait_for_timeout(300)  # htmx settles, fonts are in
    path = OUT / f"{name}.png"
    page.screenshot(path=str(path), animations="disabled", caret="hide", **options)
    print(f"wrote {path.relative_to(REPO)}")


def student_screens(browser: Browser, base: str, key: list[tuple[str, str, list[str]]]) -> None:
    context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    sign_in(page, STUDENT)
    take_quiz(page, key)
    study(page)
    shoot(page, "study")
    result = page.locator("#lab-result")
    submit_lab(page, FIRST, lab_code(FIRST, "solution"))
    expect(result.get_by_test_id("outcome")).to_have_text("10/10 Passed")
    submit_lab(page, RING, lab_code(RING, "through_rank_zero"))
    expect(result.locator("tr.fail")).to_have_count(2)  # "Each rank sends only to rank + 1" and the bytes
    expect(result.locator("figure.wire-pair").first).to_be_visible()
    shoot(page, "result", full_page=True, clip=_clip(page, "#lab-result"))
    page.goto("/")
    shoot(page, "home")
    context.close()


def _clip(page: Page, selector: str) -> dict[str, float]:
    """The element's rows of the whole page (from its top, the page's full width), with a margin above and below."""
    box = page.locator(selector).bounding_box()
    if box is None:
        raise RuntimeError(f"{selector} is not on the page {page.url}")
    top = max(0.0, box["y"] + page.evaluate("window.scrollY") - 16)
    return {"x": 0, "y": top, "width": 1280, "height": box["height"] + 32}


def gradebook(browser: Browser, base: str) -> None:
    context = browser.new_context(base_url=base, viewport={"width": 1280, "height": 800})
    page = context.new_page()
    sign_in(page, INSTRUCTOR)
    page.goto("/instructor/gradebook")  # every column group, as an instructor first sees it
    expect(page.get_by_test_id("gradebook-count")).to_contain_text(f"{len(CLASS) + 1} students")
    shoot(page, "gradebook", full_page=True)
    context.close()


def main() -> int:
    if not Path(CHROMIUM).exists():
        print(f"Chromium not found at {CHROMIUM}: install Debian's `chromium` (scripts/test.sh does).", file=sys.stderr)
        return 1
    started = time.monotonic()
    OUT.mkdir(parents=True, exist_ok=True)
    key = answer_key()
    with (
        tempfile.TemporaryDirectory(prefix="ringlab-screenshots-") as data,
        serve(Path(data)) as base,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                  "--no-first-run", "--disable-sync", "--hide-scrollbars", "--font-render-hinting=none"],
        )  # fmt: skip
        student_screens(browser, base, key)  # first, so amara's submission is graded without a queue
        class_works(base, key)
        gradebook(browser, base)
        browser.close()
    print(f"done in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
