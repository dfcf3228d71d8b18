"""The LTI round trip against a real, independent platform: an instructor's first launch connects the LMS
course, deep linking adds a quiz and a lab with gradebook columns, a student launches them, and a quiz
submit and a lab grade land in the platform's gradebook, also across an LMS outage; the roster is pulled.

One Ringlab and one platform per backend: the steps build on each other, in order.
"""

from __future__ import annotations

import re

import pytest
from sqlalchemy import select

from app.content.courses import DEFAULT_COURSE
from app.content.records import Question
from app.courses import service as courses
from app.courses.models import CourseRole
from app.db import session_scope, utcnow
from app.labs import queue
from app.labs.models import Submission, SubmissionStatus
from app.lti import sender
from app.lti.models import ContextLink, Identity, Outbox, OutboxStatus
from tests.lti.conftest import INSTRUCTOR, LATER, Agent, Tool, eventually, form_action, launch
from tests.lti.platform import CONTENT_DEVELOPER, LEARNER, Member, Platform
from tests.lti.platform import INSTRUCTOR as INSTRUCTOR_ROLE

pytestmark = pytest.mark.postgres

PROF = Member("lms-prof", "Grace Hopper", "Grace", "Hopper", "grace@example.edu", [INSTRUCTOR_ROLE])
ADA = Member("lms-ada", "Ada Lovelace", "Ada", "Lovelace", "ada@example.edu", [LEARNER])
QUIZ, LAB = "quiz:module-202", "lab:ring-allreduce"


def _sign_in(agent: Agent, username: str, password: str) -> None:
    agent.get("/signin")
    done = agent.post("/signin", data={"username": username, "password": password, "next": "/"})
    assert done.status_code == 303, done.text


def test_an_instructors_first_launch_links_their_account_and_connects_the_course(
    tool: Tool, platform: Platform, agent: Agent
) -> None:
    welcome = launch(agent, platform, PROF)
    assert welcome.status_code == 200 and "first time here" in welcome.text
    # Inside the LMS's frame: the LMS may frame every page of this browser, and the cookies are partitioned.
    assert "frame-ancestors 'self' " + platform.issuer in welcome.headers["content-security-policy"]
    assert "x-frame-options" not in welcome.headers
    _sign_in(agent, *INSTRUCTOR)
    linked = agent.follow(agent.post(form_action(welcome), data={"choice": "link"}))
    assert "Connect" in linked.text and DEFAULT_COURSE in linked.text
    home = agent.follow(agent.post(form_action(linked), data={"course_id": DEFAULT_COURSE}))
    assert home.status_code == 200 and str(home.url).startswith(f"{tool.base}/instructor")
    with session_scope(tool.factory) as session:
        context = session.scalars(select(ContextLink)).one()
        assert (context.course_id, context.title) == (DEFAULT_COURSE, platform.context_title)
        assert (
            session.scalar(select(Identity.sub).where(Identity.user_id == _user_id(session, INSTRUCTOR[0]))) == PROF.sub
        )


def _user_id(session, username: str) -> int:  # type: ignore[no-untyped-def]
    from app.accounts.service import find_user

    user = find_user(username, session=session)
    assert user is not None
    return user.id


def test_deep_linking_adds_a_quiz_and_a_lab_with_gradebook_columns(
    tool: Tool, platform: Platform, agent: Agent
) -> None:
    picker = launch(agent, platform, PROF, message_type="LtiDeepLinkingRequest", resource_link_id=None)
    assert picker.status_code == 200 and 'value="quiz:module-202"' in picker.text, picker.text[:2000]
    answer = agent.post(form_action(picker), data={"items": [QUIZ, LAB, "exercises:ch26-exercises", "lab:no-such-lab"]})
    assert answer.status_code == 200
    # The answer goes back to the LMS: only that address may receive the form.
    assert f"form-action 'self' {platform.issuer}" in answer.headers["content-security-policy"]
    action = form_action(answer, prefix=platform.issuer)
    jwt_value = re.search(r'name="JWT" value="([^"]+)"', answer.text).group(1)  # type: ignore[union-attr]
    assert action == platform.issuer + "/deep_link_return"
    returned = agent.http.post(action, data={"JWT": jwt_value})
    assert returned.status_code == 200, returned.text
    resources = sorted(i["custom"]["resource"] for i in platform.deep_link_items)
    assert resources == ["exercises:ch26-exercises", LAB, QUIZ]  # the unknown lab was not offered, so not sent
    columns = {li["resourceId"]: li for li in platform.lineitems.values()}
    assert set(columns) == {QUIZ, LAB}  # exercise sets are links without a grade
    with session_scope(tool.factory) as session:
        questions = session.scalars(
            select(Question).where(Question.quiz_id == "module-202", Question.retired_at.is_(None))
        )
        assert columns[QUIZ]["scoreMaximum"] == len(list(questions))
    assert columns[LAB]["scoreMaximum"] > 0


def _link_of(platform: Platform, resource: str) -> str:
    return next(rid for rid, link in platform.resource_links.items() if link["custom"]["resource"] == resource)


def _column(platform: Platform, resource: str) -> str:
    return next(lid for lid, li in platform.lineitems.items() if li["resourceId"] == resource)


def test_a_students_quiz_submit_reaches_the_lms_gradebook(tool: Tool, platform: Platform, agent: Agent) -> None:
    welcome = launch(agent, platform, ADA, resource_link_id=_link_of(platform, QUIZ))
    intro = agent.follow(agent.post(form_action(welcome), data={"choice": "new"}))
    assert str(intro.url).startswith(f"{tool.base}/quizzes/module-202"), intro.url
    with session_scope(tool.factory) as session:
        ada = session.scalars(select(Identity).where(Identity.sub == ADA.sub)).one().user_id
        assert courses.role_in(ada, DEFAULT_COURSE, session=session) == CourseRole.student
    score = _take_quiz(agent, tool, correct=2)
    column = _column(platform, QUIZ)
    got = eventually(lambda: platform.latest_score(column, ADA.sub))
    assert got["scoreGiven"] == score and got["activityProgress"] == "Completed"
    assert got["gradingProgress"] == "FullyGraded" and got["userId"] == ADA.sub


def _take_quiz(agent: Agent, tool: Tool, *, correct: int) -> int:
    started = agent.post("/quizzes/module-202/attempts?course=default")
    assert started.status_code == 303, started.text
    attempt_id = int(started.headers["location"].rstrip("/").split("/")[-1])
    with session_scope(tool.factory) as session:
        from app.quizzes.models import QuizAttempt

        attempt = session.get(QuizAttempt, attempt_id)
        assert attempt is not None
        ids = list(attempt.question_ids)
        answers = {q.id: q.answer for q in session.scalars(select(Question).where(Question.id.in_(ids)))}
    for qid in ids[:correct]:
        saved = agent.post(f"/quizzes/attempts/{attempt_id}/answers/{qid}", data={"choice": answers[qid]})
        assert saved.status_code in (200, 303), saved.text
    assert agent.post(f"/quizzes/attempts/{attempt_id}/submit").status_code == 303
    return correct


def test_a_lab_grade_reaches_the_lms_gradebook_and_waits_out_an_outage(
    tool: Tool, platform: Platform, agent: Agent
) -> None:
    with session_scope(tool.factory) as session:
        ada = session.scalars(select(Identity).where(Identity.sub == ADA.sub)).one().user_id
        sub = Submission(user_id=ada, lab_id="ring-allreduce", code="pass", course_id=DEFAULT_COURSE)
        session.add(sub)
        session.flush()
        submission = sub.id
    platform.stop()  # the LMS is down while the lab is graded
    try:
        _grade(tool, submission, score=7.5)
        with session_scope(tool.factory) as session:
            row = session.scalars(select(Outbox).where(Outbox.resource == LAB)).one()
            assert row.status == OutboxStatus.pending  # owed, not lost
        eventually(lambda: _failing(tool, LAB))  # the sender tried, failed, and will try again
    finally:
        platform.start()
    sender.drain(tool.factory, now=utcnow() + LATER)  # past the back-off: as the sender will in a while
    got = eventually(lambda: platform.latest_score(_column(platform, LAB), ADA.sub))
    assert got["scoreGiven"] == 7.5 and got["gradingProgress"] == "FullyGraded"
    with session_scope(tool.factory) as session:
        row = session.scalars(select(Outbox).where(Outbox.resource == LAB)).one()
        assert (row.status, row.sent_score, row.tries) == (OutboxStatus.sent, 7.5, 0)


def _failing(tool: Tool, resource: str) -> bool:
    with session_scope(tool.factory) as session:
        row = session.scalars(select(Outbox).where(Outbox.resource == resource)).one()
        return row.tries > 0 and bool(row.last_error)


def _grade(tool: Tool, submission_id: int, *, score: float) -> None:
    """What a grading worker does with a verdict (claim, then finish), so the grade's own transaction owes it."""
    from app.labs.queue import Capacity

    capacity = Capacity("w-lti", "host", 1, 4, 0, sandboxed=True)
    with session_scope(tool.factory) as session:
        queue.register(capacity, session=session, now=utcnow())
    with session_scope(tool.factory) as session:
        job = queue.claim(capacity, session=session, now=utcnow(), lease_s=60, max_attempts=3)
        assert job is not None and job.id == submission_id
        verdict = {"status": "graded", "score": score, "max_score": 10, "checks": []}
        status = queue.finish(job, "w-lti", verdict, session=session, now=utcnow(), max_attempts=3)
        assert status == SubmissionStatus.graded


def test_only_the_latest_score_is_sent_and_one_token_serves_many_sends(tool: Tool, platform: Platform) -> None:
    tokens = len(platform.token_requests)
    with session_scope(tool.factory) as session:
        ada = session.scalars(select(Identity).where(Identity.sub == ADA.sub)).one().user_id
    agent = Agent(tool.base)
    try:
        launch(agent, platform, ADA, resource_link_id=_link_of(platform, QUIZ))
        column = _column(platform, QUIZ)
        before = len(platform.scores.get(column, []))
        _take_quiz(agent, tool, correct=3)
        got = eventually(lambda: (s := platform.latest_score(column, ADA.sub)) and s["scoreGiven"] == 3 and s)
        assert got["scoreGiven"] == 3  # the best attempt counts
        _take_quiz(agent, tool, correct=1)  # a worse attempt: the best still counts
        eventually(lambda: len(platform.scores.get(column, [])) > before + 1)
        assert platform.latest_score(column, ADA.sub)["scoreGiven"] == 3
    finally:
        agent.close()
    assert len(platform.token_requests) == tokens  # the cached token (issuer + client id + scopes) served them
    del ada


def test_staff_see_what_was_sent_and_can_resend(tool: Tool, platform: Platform, agent: Agent) -> None:
    launch(agent, platform, PROF)
    page = agent.get("/instructor/lti?course=default")
    assert page.status_code == 200 and platform.context_title in page.text
    assert 'data-resource="quiz:module-202"' in page.text
    column = _column(platform, QUIZ)
    before = len(platform.scores.get(column, []))
    resent = agent.post(
        "/instructor/lti/resend?course=default", data={"context_pk": _context_pk(tool), "resource": QUIZ}
    )
    assert resent.status_code == 303
    eventually(lambda: len(platform.scores.get(column, [])) > before)


def _context_pk(tool: Tool) -> int:
    with session_scope(tool.factory) as session:
        return session.scalars(select(ContextLink.id)).one()


def test_the_lms_roster_is_pulled_into_the_course(tool: Tool, platform: Platform, agent: Agent) -> None:
    launch(agent, platform, PROF)
    pulled = agent.follow(agent.post("/instructor/lti/roster?course=default", data={"context_pk": _context_pk(tool)}))
    assert pulled.status_code == 200 and "Roster pulled" in pulled.text
    with session_scope(tool.factory) as session:
        for member in platform.members:
            identity = session.scalars(select(Identity).where(Identity.sub == member.sub)).first()
            assert identity is not None, member
            role = courses.role_in(identity.user_id, DEFAULT_COURSE, session=session)
            expected = CourseRole.student if LEARNER in member.roles else CourseRole.instructor
            if CONTENT_DEVELOPER in member.roles or INSTRUCTOR_ROLE in member.roles or LEARNER in member.roles:
                assert role == expected, (member, role)
    gradebook = agent.get("/instructor/gradebook?course=default")
    never_launched = [m for m in platform.members if LEARNER in m.roles and m.sub != ADA.sub]
    assert never_launched and all(m.given_name.lower() in gradebook.text.lower() for m in never_launched)
