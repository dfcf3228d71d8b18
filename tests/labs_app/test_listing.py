"""The labs list: grouped by exercise section, in exercise order, with each student's status."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.db import utcnow
from app.labs import listing
from app.labs.catalog import PublishedLab
from app.labs.models import Submission, SubmissionStatus
from labs.spec import LabSpec
from tests.factories import make_user, sign_in


def lab(lab_id: str, exercise: str) -> PublishedLab:
    check = {"id": "a", "title": "A", "points": 1}
    spec = LabSpec.model_validate(
        {"id": lab_id, "title": lab_id, "exercise": exercise, "world_sizes": [2], "backends": ["gloo"],
         "time_limit_s": 5, "memory_limit_mb": 256, "functions": ["f"], "checks": [check]}
    )  # fmt: skip
    return PublishedLab(spec, 1, "d", {})


def test_group_orders_by_exercise_number_and_says_the_status() -> None:
    places = {
        "e-35-10": listing.Place("ch35", "Chapter 35", "Parallelism", "35.10"),
        "e-35-9": listing.Place("ch35", "Chapter 35", "Parallelism", "35.9"),
        "e-26-2": listing.Place("ch26", "Chapter 26", "Data", "26.2"),
    }
    labs = [lab("tp", "e-35-10"), lab("pp", "e-35-9"), lab("sampler", "e-26-2"), lab("lost", "gone")]
    groups = listing.group(labs, places, {"tp": (10, 10), "pp": (3, 10)})
    assert [g.title for g in groups] == ["Chapter 26: Data", "Chapter 35: Parallelism", "Other labs"]
    assert [r.lab.id for r in groups[1].rows] == ["pp", "tp"]  # 35.9 before 35.10
    assert [r.status for r in groups[1].rows] == ["tried", "passed"]
    assert groups[0].rows[0].status == "not tried"
    assert all(r.status is None for g in listing.group(labs, places, None) for r in g.rows)  # signed out


def test_the_page_shows_each_lab_under_its_section_with_the_students_status(
    client: TestClient, session: Session
) -> None:
    user = make_user(session, "lister")
    now = utcnow()
    for score in (4, 10):
        session.add(
            Submission(user_id=user.id, lab_id="ring-allreduce", code="x", status=SubmissionStatus.graded,
                       score=score, max_score=10, queued_at=now, submitted_at=now, finished_at=now)
        )  # fmt: skip
    session.add(
        Submission(user_id=user.id, lab_id="tensor-parallel", code="x", status=SubmissionStatus.graded,
                   score=6, max_score=10, queued_at=now, submitted_at=now, finished_at=now)
    )  # fmt: skip
    session.commit()
    anonymous = client.get("/labs").text
    assert "not tried" not in anonymous and 'data-lab="ring-allreduce"' in anonymous
    sign_in(client, "lister")
    page = client.get("/labs").text
    assert re.search(r'data-lab="ring-allreduce">.*?data-status="passed">passed 10/10', page, re.S)
    assert re.search(r'data-lab="tensor-parallel">.*?data-status="tried">best 6/10', page, re.S)
    assert re.search(r'data-lab="zero-1">.*?data-status="not-tried"', page, re.S)
    # Grouped by the exercise sets' sections, each lab naming its exercise.
    assert page.count('class="lab-group"') >= 2 and "Exercise 35.2" in page
