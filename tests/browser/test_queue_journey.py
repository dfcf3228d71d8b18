"""A student submits while the grading queue is busy: before submitting, the lab page says the queue is
long; the waiting result shows the submission's position and an estimate, read out once by the page's
live region and again only when it changes, while the polling never takes the keyboard focus.

The server runs without its embedded worker. A worker held busy is played from this test with the
queue's own calls (register, claim, heartbeat: what `ringlab worker` does), in the server's database:
three jobs graded in 8 s each, a fourth still being graded, one more queued ahead of the student. A
job 20 s from its result is asked about in requests the server holds until its status changes, 10 s
at most (a quarter of its wait, at least 10 s), answered then with its new place.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect
from sqlalchemy.orm import Session, sessionmaker

from app.db import make_engine, make_sessionmaker, utcnow
from app.labs import queue
from app.labs.models import Submission
from tests.browser.conftest import serve, sign_up
from tests.factories import make_user
from tests.labs_app import waiting

pytestmark = pytest.mark.browser
WAIT = "Queued: position 2 in the queue, about 20 s to your result."
NEXT = "Queued: position 1 in the queue, about 15 s to your result."


@pytest.fixture(scope="module")
def quiet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """(base URL, data folder) of a server that grades nothing by itself."""
    data = tmp_path_factory.mktemp("queue-data")
    with serve(data, RINGLAB_EMBEDDED_WORKER="false", RINGLAB_LAB_QUEUE_LONG_S="10") as base:
        yield base, data


@pytest.fixture
def db(quiet: tuple[str, Path]) -> Iterator[sessionmaker[Session]]:
    engine = make_engine(f"sqlite:///{quiet[1] / 'ringlab.sqlite3'}")
    yield make_sessionmaker(engine)
    engine.dispose()


def _heartbeat(db: sessionmaker[Session], state: waiting.Busy, stop: threading.Event) -> None:
    """The busy worker's lease thread: it renews its job and says it is alive, every 2 s."""
    while not stop.wait(2.0):
        with db() as session:
            queue.renew(state.held, state.worker.worker_id, session=session, now=utcnow())
            session.commit()


def test_a_submission_in_a_busy_queue_shows_its_place_and_wait(
    browser: Browser, quiet: tuple[str, Path], db: sessionmaker[Session]
) -> None:
    with db() as session:
        a, b = (make_user(session, name).id for name in ("earlier-ada", "earlier-bob"))
        state = waiting.busy(session, a, b, "busy-worker", utcnow(), grade_s=8.0)
    stop = threading.Event()
    beat = threading.Thread(target=_heartbeat, args=(db, state, stop), daemon=True)
    beat.start()
    context = browser.new_context(base_url=quiet[0])
    page: Page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    try:
        sign_up(page, "queue")
        page.goto("/labs/ring-allreduce")
        long = page.get_by_test_id("queue-long")
        expect(long).to_have_text(
            "The grading queue is long now: a submission made now would wait about 20 s for its result "
            "(1 job ahead of it, 1 worker grading)."
        )
        submit = page.get_by_role("button", name="Submit")
        expect(submit).to_have_accessible_description(long.inner_text())

        # Every text the live region takes is recorded.
        page.evaluate(
            """() => {
              window.__said = [];
              const region = document.getElementById("announcer");
              new MutationObserver(() => { if (region.textContent) window.__said.push(region.textContent); })
                .observe(region, {childList: true, characterData: true, subtree: true});
            }"""
        )
        submit.click()
        result = page.locator("#lab-result")
        expect(result).to_have_attribute("data-status", "queued")
        expect(result.get_by_test_id("queue-line")).to_have_text(WAIT)
        expect(result.get_by_test_id("queue-basis")).to_contain_text("a job took 8.0 s to grade (the median)")
        announcer = page.locator("#announcer")
        expect(announcer).to_have_attribute("aria-live", "polite")
        expect(announcer).to_have_attribute("role", "status")
        expect(announcer).to_have_text(WAIT)

        # The keyboard is somewhere else on the page while the result is asked about again (held 10 s).
        starter = page.get_by_role("link", name="Download the starter code")
        starter.focus()
        with page.expect_response(lambda r: "/labs/submissions/" in r.url and "wait=10" in r.url):
            pass
        expect(starter).to_be_focused()
        assert page.evaluate("window.__said") == [WAIT]  # said once, not once per poll

        # The job ahead is taken by a second worker: the new line is said, once.
        with db() as session:
            helper = waiting.worker(session, "helper-worker", utcnow())
            waiting.claim(session, helper, utcnow(), session.get_one(Submission, state.queued))
        expect(result.get_by_test_id("queue-line")).to_have_text(NEXT, timeout=15_000)  # at the hold's end
        expect(announcer).to_have_text(NEXT)
        with page.expect_response(lambda r: "/labs/submissions/" in r.url):
            pass
        assert page.evaluate("window.__said") == [WAIT, NEXT]
        expect(starter).to_be_focused()
        expect(result).not_to_have_attribute("aria-live", "polite")  # replaced by each poll: not the live region
    finally:
        stop.set()
        beat.join(timeout=10)
        context.close()
    assert not errors, f"browser console errors: {errors}"
