"""The labs list: the path through the labs, in order, with each student's state for each lab."""

from __future__ import annotations

import re

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.db import utcnow
from app.labs import catalog, listing
from app.labs.catalog import PublishedLab
from app.labs.models import Submission, SubmissionStatus
from labs.spec import LabSpec
from tests.conftest import LAB_COUNT
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


def graded(session: Session, user_id: int, lab_id: str, score: int, max_score: int) -> None:
    now = utcnow()
    session.add(
        Submission(user_id=user_id, lab_id=lab_id, code="x", status=SubmissionStatus.graded, score=score,
                   max_score=max_score, queued_at=now, submitted_at=now, finished_at=now)
    )  # fmt: skip


def cards(page: str) -> dict[str, str]:
    """Each lab's card on the labs page, by lab id, in page order."""
    found = re.findall(r'<article class="lab-card" data-lab="([^"]+)"(.*?)</article>', page, re.S)
    return {lab_id: " ".join(body.split()) for lab_id, body in found}


def test_the_page_shows_the_path_in_order_with_each_labs_state_in_words(client: TestClient, session: Session) -> None:
    user = make_user(session, "lister")
    make_user(session, "someone-else")
    full = {lab_id: lab.spec.max_score for lab_id, lab in catalog.all_labs(session).items()}
    for lab_id in ("memory-estimate", "collectives-p2p", "zero-1"):  # zero-1 out of order: nothing is locked
        graded(session, user.id, lab_id, full[lab_id], full[lab_id])
    graded(session, user.id, "ring-allreduce", 4, full["ring-allreduce"])
    session.commit()

    anonymous = cards(client.get("/labs").text)
    assert "data-state" not in "".join(anonymous.values())
    p2p = '<a href="/labs/collectives-p2p">Collectives from point-to-point</a>'
    assert f"Builds on: {p2p}" in anonymous["ring-allreduce"]

    sign_in(client, "lister")
    page = client.get("/labs").text
    shown = cards(page)
    assert list(shown) == list(anonymous)  # one order for everyone: the scores change states, not places
    assert list(shown)[:6] == ["memory-estimate", "tiled-attention", "collectives-p2p", "ring-allreduce",
                               "comm-bandwidth", "ddp-from-scratch"]  # fmt: skip
    specs = catalog.all_labs(session)
    for lab_id in shown:  # every lab after the labs it builds on
        assert all(list(shown).index(a) < list(shown).index(lab_id) for a in specs[lab_id].spec.after), lab_id
    states = {lab_id: re.sub(r"<[^>]+>", "", card.split('<p class="lab-state">')[1].split("</p>")[0]).strip()
              for lab_id, card in shown.items()}  # fmt: skip
    assert states["memory-estimate"] == f"Done {full['memory-estimate']}/{full['memory-estimate']}"
    assert states["tiled-attention"] == "Next (suggested) · not tried"
    assert states["ring-allreduce"] == f"Next · best 4/{full['ring-allreduce']}"
    assert states["ddp-from-scratch"] == "Do first: Ring all-reduce · not tried"
    assert states["zero-1"] == f"Done {full['zero-1']}/{full['zero-1']}"
    assert states["fsdp-wrapping"] == "Next · not tried"
    assert states["gpu-mixed-precision"].startswith("Do first: Dynamic loss scaling")
    assert 'data-lab="ddp-from-scratch" data-state="not-yet"' in page
    assert '<a href="/labs/ring-allreduce">Ring all-reduce</a>' in shown["ddp-from-scratch"]  # do first: a link
    assert f"You have done <strong>3 of {LAB_COUNT}</strong> with full marks." in page
    assert "Exercise 35.2 · World sizes 2, 3, 4" in shown["ring-allreduce"]

    sign_in(client, "someone-else")  # another student's work changes nothing of theirs
    other = client.get("/labs").text
    assert f"You have done <strong>0 of {LAB_COUNT}</strong>" in other and 'data-state="done"' not in other
