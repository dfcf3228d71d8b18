"""A corrected part value re-marks every stored answer to the part, with a record the student sees.

The server first holds Exercise 26.20 with the break-even part as it was first published (2.0
preemptions), students answer, then the corrected content (3, the whole number the exercise
asks for) is synced.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select
from sqlalchemy.orm import Session

from app.content.markdown import render_inline
from app.content.models import ContentTree, Exercise
from app.content.sync import sync_tree
from app.exercises import progress
from app.exercises.models import PartAnswer, PartProgress, PartRescore
from app.exercises.rescore import PartChange
from tests.factories import api_token, make_user, sign_in

EX, PART = "ex-26-20", "bert-break-even"
T_OLD, T_NEW = datetime(2026, 3, 1, 9, 0, tzinfo=UTC), datetime(2026, 3, 5, 9, 0, tzinfo=UTC)


def _exercise(tree: ContentTree) -> Exercise:
    return next(e for s in tree.exercise_sets for e in s.exercises if e.id == EX)


@pytest.fixture
def trees(content_tree: ContentTree) -> tuple[ContentTree, ContentTree]:
    """(26.20 with the break-even part keyed 2.0 within 2 %, the corrected content)."""
    new = _exercise(content_tree)
    part = next(p for p in new.parts if p.id == PART)
    fixed = PartChange(EX, PART, part.value, part.tolerance, part.unit)
    assert fixed.accepts("3") and not fixed.accepts("2")
    old_part = part.model_copy(update={"value": 2.0, "tolerance": "2%", "errata": []})
    old = new.model_copy(update={"parts": [old_part if p.id == PART else p for p in new.parts]})
    sets = [
        s.model_copy(update={"exercises": [old if e.id == EX else e for e in s.exercises]})
        for s in content_tree.exercise_sets
    ]
    return content_tree.model_copy(update={"exercise_sets": sets}), content_tree


def _answer(session: Session, user_id: int, answer: str, minutes: int) -> bool:
    now = T_OLD + timedelta(minutes=minutes)
    return progress.answer_part(EX, PART, user_id, answer, session=session, now=now).correct


def _progress(session: Session, user_id: int) -> PartProgress:
    query = select(PartProgress).where(PartProgress.user_id == user_id, PartProgress.part_id == PART)
    return session.scalars(query).one()


def test_answers_are_marked_again_and_solved_follows_the_first_right_one(
    session: Session, trees: tuple[ContentTree, ContentTree]
) -> None:
    old, new = trees
    sync_tree(old, session=session, now=T_OLD)
    gave_two = make_user(session, "gave-two")
    three_then_two = make_user(session, "three-then-two")
    gave_three = make_user(session, "gave-three")
    assert _answer(session, gave_two.id, "2", 1) is True
    assert [_answer(session, three_then_two.id, a, m) for a, m in (("3", 1), ("2.0", 2))] == [False, True]
    assert _answer(session, gave_three.id, "3", 1) is False
    session.commit()

    report = sync_tree(new, session=session, now=T_NEW)
    session.commit()

    assert report.rescored == {"exercise part": 3}
    assert _progress(session, gave_two.id).solved_at is None  # 2 is no longer right: the part is open again
    assert _progress(session, three_then_two.id).solved_at == T_OLD + timedelta(minutes=1)  # from the first "3"
    assert _progress(session, gave_three.id).solved_at == T_OLD + timedelta(minutes=1)
    marks = session.execute(
        select(PartAnswer.user_id, PartAnswer.answer, PartAnswer.correct)
        .where(PartAnswer.part_id == PART)
        .order_by(PartAnswer.user_id, PartAnswer.id)
    ).all()
    assert [tuple(m) for m in marks] == [
        (gave_two.id, "2", False), (three_then_two.id, "3", True), (three_then_two.id, "2.0", False),
        (gave_three.id, "3", True),
    ]  # fmt: skip
    rows = {r.user_id: r for r in session.scalars(select(PartRescore))}
    assert {u: (r.was_solved, r.now_solved, r.answers_changed) for u, r in rows.items()} == {
        gave_two.id: (True, False, 1),
        three_then_two.id: (True, True, 2),
        gave_three.id: (False, True, 1),
    }
    part = next(p for p in _exercise(new).parts if p.id == PART)
    [why] = [render_inline(e.note) for e in part.errata if e.field == "value"]  # the erratum says why
    assert all((r.rescored_at, r.note_html) == (T_NEW, why) for r in rows.values())
    assert sync_tree(new, session=session, now=T_NEW).rescored == {}


def test_the_student_sees_the_rescore_beside_the_part(
    client: TestClient, session: Session, trees: tuple[ContentTree, ContentTree]
) -> None:
    old, new = trees
    sync_tree(old, session=session, now=T_OLD)
    user = make_user(session, "part-reopened")
    _answer(session, user.id, "2", 1)
    sync_tree(new, session=session, now=T_NEW)
    session.commit()
    sign_in(client, "part-reopened")
    page = client.get(f"/exercises/ch26-exercises/{EX}").text
    assert 'data-testid="rescored"' in page
    assert "no answer you gave is right under it: the part is open again" in page
    # Open again: the student can answer, and the right answer now solves it, with the erratum beside it.
    api = api_token(client, "part-reopened")
    body = client.post(f"/api/v1/exercises/{EX}/parts/{PART}/answer", json={"value": "3"}, headers=api).json()
    assert body["correct"] is True and "**Corrected:**" in body["explanation"]
    page = client.get(f"/exercises/ch26-exercises/{EX}").text
    assert '<div class="erratum" role="note" data-field="value">' in page
