"""LTI 1.3 launches and grade passback against a real platform (the tests' ``lti1p3platform`` LMS).

Serves Ringlab (uvicorn, in this process, a fresh database) and the platform, both over HTTP on
loopback, registers the platform, connects its course and deep-links the Module 202 quiz, then times:

- a launch by a student who has an account: login initiation, the platform's authorization, the
  form post, to the quiz page (each ``-n`` times, after two warm-ups);
- a first launch: the same, plus "Make my Ringlab account", to the quiz page;
- grade passback: ``--students`` students submit an attempt each, then the outbox is sent
  (``ringlab lti send``'s ``drain``), timed as scores per second and per-score milliseconds;
- submit → in the LMS's gradebook with the web process's own sender (``RINGLAB_LTI_SEND_EVERY``,
  default 5 s): what a student waits, which the sending interval bounds.

    .venv/bin/python bench/lti.py [-n 30] [--students 100] [--backend sqlite|postgresql] [--send-every 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import select  # noqa: E402

from app.content.courses import DEFAULT_COURSE  # noqa: E402
from app.db import session_scope, utcnow  # noqa: E402
from app.lti import sender  # noqa: E402
from app.lti.models import ContextLink, Identity, Outbox, OutboxStatus  # noqa: E402
from app.lti.models import Platform as LtiPlatform  # noqa: E402
from tests.lti.conftest import Agent, form_action, launch  # noqa: E402
from tests.lti.live import serve_tool  # noqa: E402
from tests.lti.platform import INSTRUCTOR, LEARNER, Member, Platform  # noqa: E402

QUIZ = "quiz:module-202"


def _ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return f"median {statistics.median(ordered) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms (n={len(ordered)})"


def _member(prefix: str) -> Member:
    tag = uuid.uuid4().hex[:6]
    return Member(f"{prefix}-{tag}", f"Bench {tag}", "Bench", tag, f"{tag}@example.edu", [LEARNER])


def _deep_link_quiz(tool_base: str, lms: Platform) -> str:
    prof = Member("bench-prof", "Prof Bench", "Prof", "Bench", "p@example.edu", [INSTRUCTOR])
    agent = Agent(tool_base)
    first = launch(agent, lms, prof)
    agent.follow(agent.post(form_action(first), data={"choice": "new"}))
    picker = launch(agent, lms, prof, message_type="LtiDeepLinkingRequest", resource_link_id=None)
    answer = agent.post(form_action(picker), data={"items": [QUIZ]})
    import re

    jwt_value = re.search(r'name="JWT" value="([^"]+)"', answer.text).group(1)  # type: ignore[union-attr]
    assert agent.http.post(lms.issuer + "/deep_link_return", data={"JWT": jwt_value}).status_code == 200
    agent.close()
    return next(rid for rid, link in lms.resource_links.items() if link["custom"].get("resource") == QUIZ)


def _submit(agent: Agent) -> None:
    started = agent.post("/quizzes/module-202/attempts?course=default")
    attempt = started.headers["location"].rstrip("/").split("/")[-1]
    assert agent.post(f"/quizzes/attempts/{attempt}/submit").status_code == 303


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=30)
    parser.add_argument("--students", type=int, default=100)
    parser.add_argument("--backend", default="sqlite", choices=["sqlite", "postgresql"])
    parser.add_argument("--send-every", type=float, default=5.0)
    args = parser.parse_args()

    with serve_tool(args.backend, send_every=args.send_every) as tool:
        lms = Platform(tool.base).start()
        try:
            tool.register(lms)
            with session_scope(tool.factory) as session:
                lms_id = session.scalars(select(LtiPlatform.id)).one()
                session.add(ContextLink(platform_id=lms_id, context_id=lms.context_id, title="Bench",
                                        course_id=DEFAULT_COURSE))  # fmt: skip
            link = _deep_link_quiz(tool.base, lms)
            print(f"Ringlab on {args.backend}, sender every {args.send_every:g} s; platform on {lms.issuer}")

            first: list[float] = []
            for _ in range(args.n + 2):
                agent, who = Agent(tool.base), _member("first")
                t = time.perf_counter()
                welcome = launch(agent, lms, who, resource_link_id=link)
                landed = agent.follow(agent.post(form_action(welcome), data={"choice": "new"}))
                first.append(time.perf_counter() - t)
                assert "/quizzes/module-202" in str(landed.url)
                agent.close()
            print(f"first launch (new account) to the quiz page: {_ms(first[2:])}")

            again: list[float] = []
            agent, who = Agent(tool.base), _member("again")
            welcome = launch(agent, lms, who, resource_link_id=link)
            agent.follow(agent.post(form_action(welcome), data={"choice": "new"}))
            for _ in range(args.n + 2):
                t = time.perf_counter()
                landed = launch(agent, lms, who, resource_link_id=link)
                again.append(time.perf_counter() - t)
                assert landed.status_code == 200 and "/quizzes/module-202" in str(landed.url)
            print(f"launch with an account to the quiz page: {_ms(again[2:])}")

            waits: list[float] = []
            column = next(lid for lid, li in lms.lineitems.items() if li["resourceId"] == QUIZ)
            for _ in range(min(args.n, 10)):
                before = len(lms.scores.get(column, []))
                t = time.perf_counter()
                _submit(agent)
                while len(lms.scores.get(column, [])) <= before:
                    time.sleep(0.01)
                waits.append(time.perf_counter() - t)
            agent.close()
            print(f"quiz submit -> score in the LMS gradebook (web process's sender): {_ms(waits)}")

            tool.stop_sender()
            students = []
            for _ in range(args.students):
                a, who = Agent(tool.base), _member("class")
                welcome = launch(a, lms, who, resource_link_id=link)
                a.follow(a.post(form_action(welcome), data={"choice": "new"}))
                students.append(a)
            for a in students:
                _submit(a)
                a.close()
            with session_scope(tool.factory) as session:
                owed = len(session.scalars(select(Outbox.id).where(Outbox.status == OutboxStatus.pending)).all())
            tokens = len(lms.token_requests)
            t = time.perf_counter()
            sent = 0
            while n := sender.drain(tool.factory, now=utcnow()):
                sent += n
            took = time.perf_counter() - t
            print(
                f"grade passback: {sent} owed scores sent in {took:.2f} s = {sent / took:.0f} scores/s, "
                f"{took / max(sent, 1) * 1000:.1f} ms each ({owed} owed; {len(lms.token_requests) - tokens} new "
                "access tokens)"
            )
            with session_scope(tool.factory) as session:
                left = session.scalars(select(Outbox.id).where(Outbox.status == OutboxStatus.pending)).all()
                identities = len(session.scalars(select(Identity.id)).all())
            print(f"left owed: {len(left)}; identities: {identities}")
        finally:
            lms.stop()


if __name__ == "__main__":
    main()
