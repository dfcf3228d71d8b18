"""When the countdown speaks and warns (pure), and the attempt page that hands it to the browser."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.db import utcnow
from app.quizzes import attempts, countdown
from tests.factories import make_user, sign_in


@pytest.mark.parametrize(
    ("minutes", "marks"),
    [
        (90, (3600, 1800, 600, 300, 60)),
        (60, (1800, 600, 300, 60)),
        (30, (600, 300, 60)),
        (10, (300, 60)),
        (5, (60,)),
        (2, (60, 30)),
        (1, (30,)),
    ],
)
def test_announce_at_only_marks_shorter_than_the_limit(minutes: int, marks: tuple[int, ...]) -> None:
    assert countdown.announce_at(minutes * 60) == marks


def test_a_very_short_limit_announces_nothing_before_zero() -> None:
    assert countdown.announce_at(30) == ()


@pytest.mark.parametrize(("minutes", "warn"), [(90, 300), (60, 300), (50, 300), (20, 120), (10, 60), (1, 30)])
def test_warn_at_five_minutes_or_the_last_tenth(minutes: int, warn: int) -> None:
    assert countdown.warn_at(minutes * 60) == warn


@pytest.mark.parametrize(
    ("seconds", "said"),
    [
        (0, "0 seconds"),
        (1, "1 second"),
        (45, "45 seconds"),
        (60, "1 minute"),
        (300, "5 minutes"),
        (3600, "1 hour"),
        (3660, "1 hour 1 minute"),
        (5400, "1 hour 30 minutes"),
    ],
)
def test_words(seconds: int, said: str) -> None:
    assert countdown.words(seconds) == said


def test_the_attempt_page_has_a_quiet_timer_a_written_warning_and_a_button(
    client: TestClient, session: Session
) -> None:
    student = make_user(session, "timer-web")
    sign_in(client, "timer-web")
    attempt, _ = attempts.start_attempt("module-202", student.id, session=session, now=utcnow())
    session.commit()
    page = client.get(f"/quizzes/attempts/{attempt.id}").text
    assert re.search(r'class="countdown-clock" role="timer" aria-live="off"', page)
    # What it says goes to the page's announcer, a live region there from the start (empty), so it is read.
    assert re.search(r'<div id="announcer"[^>]* role="status"[^>]*></div>', page)
    clock = page[page.index('<div class="countdown') :].split("</div>")[0]
    assert 'role="status"' not in clock and clock.count("aria-live") == 1
    assert "data-countdown-ask hidden>Say the time left</button>" in page
    assert 'data-announce-at="1800 600 300 60"' in page and 'data-warn-at="300"' in page
    # Not in the last five minutes: the written warning is there for the script, hidden.
    assert re.search(r"data-countdown-warning hidden>Time is nearly up\. Your answers are saved; the attempt will be "
                     r"submitted automatically at <time datetime=\"[^\"]+\">\d\d:\d\d</time>\.</p>", page)  # fmt: skip
    assert re.search(r'data-deadline="\d\d:\d\d"', page)


def test_in_the_last_minutes_the_warning_is_written_on_the_page(client: TestClient, session: Session) -> None:
    student = make_user(session, "timer-late")
    sign_in(client, "timer-late")
    attempt, _ = attempts.start_attempt("module-202", student.id, session=session, now=utcnow() - timedelta(minutes=57))
    session.commit()
    page = client.get(f"/quizzes/attempts/{attempt.id}").text
    assert 'class="countdown is-low"' in page
    assert re.search(r"data-countdown-warning>Time is nearly up\.", page)
    assert attempt.deadline is not None
    # In the student's time zone (UTC unless they chose one): the script says the same time.
    hhmm = attempt.deadline.strftime("%H:%M")
    assert f'submitted automatically at <time datetime="{attempt.deadline.isoformat()}">{hhmm}</time>.' in page
    assert f'data-deadline="{hhmm}"' in page
