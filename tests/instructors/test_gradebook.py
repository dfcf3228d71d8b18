"""The gradebook service and its exports, over a small class built with the factories."""

from __future__ import annotations

import csv
import io
from collections.abc import Collection, Sequence
from datetime import timedelta

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.exercises import progress
from app.exercises.service import lab_best_scores
from app.instructors import exports, gradebook
from app.labs.models import SubmissionStatus
from tests.factories import make_submission, sign_in
from tests.instructors.conftest import T0, Klass


def ctx() -> gradebook.Context:
    return gradebook.Context(now=T0 + timedelta(days=30))


def test_one_row_per_student_with_best_scores_counts_late_and_flashcards(session: Session, klass: Klass) -> None:
    book = gradebook.build(session=session, ctx=ctx())
    assert [r.student.username for r in book.rows] == ["ada", "bob", "cyd"]  # students only, by name
    assert [c.key for c in book.columns][:2] == ["quiz:ch35-quiz", "quiz:module-202"]
    assert "lab:ring-allreduce" in [c.key for c in book.columns]
    ada, bob, cyd = book.rows
    assert ada.cell("quiz:module-202") == gradebook.Cell(24, 2, 1)  # best 24 of 2 attempts, the second late
    assert ada.cell("lab:ring-allreduce") == gradebook.Cell(10, 2, 0)
    assert bob.cell("quiz:ch35-quiz") == gradebook.Cell(15, 1, 0)
    assert bob.cell("lab:ring-allreduce") == gradebook.Cell(None, 1, 0)  # failed: submitted, no score
    assert bob.cell("flashcards:reviews").value == 8
    assert bob.cell("flashcards:true_retention").value == 0.75  # 3 of 4 reviews in the review state passed
    assert bob.cell("flashcards:cards_due").value == 4  # due two days after T0, looked at 30 days later
    assert cyd.cells == {}
    assert [g for g, _ in book.groups] == ["Quizzes", "Labs", "Exercises", "Flashcards"]


def test_filter_by_name_sort_by_a_column_and_paginate(session: Session, klass: Klass) -> None:
    assert [r.student.username for r in gradebook.build(session=session, ctx=ctx(), query="B").rows] == ["bob"]
    by_lab = gradebook.build(session=session, ctx=ctx(), sort="lab:ring-allreduce", descending=True)
    # Highest first; students without a score come last, whatever the direction.
    assert [r.student.username for r in by_lab.rows] == ["ada", "bob", "cyd"]
    by_reviews = gradebook.build(session=session, ctx=ctx(), sort="flashcards:reviews", descending=False)
    assert [r.student.username for r in by_reviews.rows] == ["bob", "ada", "cyd"]
    desc = gradebook.build(session=session, ctx=ctx(), descending=True)
    assert [r.student.username for r in desc.rows] == ["cyd", "bob", "ada"]
    page2 = gradebook.build(session=session, ctx=ctx(), per_page=2, page=2)
    assert (page2.total, page2.pages, [r.student.username for r in page2.rows]) == (3, 2, ["cyd"])
    sorted_page = gradebook.build(session=session, ctx=ctx(), sort="quiz:module-202", descending=True, per_page=1)
    assert [r.student.username for r in sorted_page.rows] == ["ada"]
    assert sorted_page.rows[0].cell("lab:ring-allreduce").value == 10  # the page's other columns are filled too
    assert gradebook.build(session=session, ctx=ctx(), sort="no-such-column").sort == "name"
    assert sorted_page.url(page=2) == "/instructor/gradebook?sort=quiz%3Amodule-202&desc=true&page=2"
    assert sorted_page.sort_url("quiz:module-202") == "/instructor/gradebook?sort=quiz%3Amodule-202"


def test_a_new_source_adds_columns_the_way_exercise_sets_will(session: Session, klass: Klass) -> None:
    class Solved:
        def columns(self, *, session: Session, ctx: gradebook.Context) -> list[gradebook.Column]:
            return [gradebook.Column("exercises:ch35-exercises", "Exercise sets", "Chapter 35", "parts", 24)]

        def cells(
            self, columns: Sequence[gradebook.Column], user_ids: Collection[int] | None, *, session: Session,
            ctx: gradebook.Context,
        ) -> gradebook.Cells:  # fmt: skip
            return {(klass.ada.id, "exercises:ch35-exercises"): gradebook.Cell(5, 5)}

    book = gradebook.build(session=session, ctx=ctx(), sources=(*gradebook.SOURCES, Solved()))
    assert book.rows[0].cell("exercises:ch35-exercises") == gradebook.Cell(5, 5)
    assert "exercises:ch35-exercises:parts" in exports.gradebook_fields(book.columns)


def test_gradebook_csv_has_one_header_row_and_stable_field_names(session: Session, klass: Klass) -> None:
    book = gradebook.build(session=session, ctx=ctx(), per_page=None)
    text = exports.to_csv(exports.gradebook_fields(book.columns), exports.gradebook_records(book))
    rows = list(csv.reader(io.StringIO(text)))
    header = rows[0]
    assert header[:2] == ["student", "user_id"]
    for field in ("quiz:module-202:best", "quiz:module-202:max", "quiz:module-202:attempts", "quiz:module-202:late",
                  "lab:ring-allreduce:best", "lab:ring-allreduce:submissions", "lab:ring-allreduce:late",
                  "flashcards:reviews", "flashcards:true_retention", "flashcards:cards_due"):  # fmt: skip
        assert field in header
    records = [dict(zip(header, r, strict=True)) for r in rows[1:]]
    assert [r["student"] for r in records] == ["ada", "bob", "cyd"]
    assert records[0]["quiz:module-202:best"] == "24" and records[0]["quiz:module-202:late"] == "1"
    assert records[0]["quiz:module-202:max"] == "25"
    assert records[1]["flashcards:true_retention"] == "0.75"
    assert records[2]["quiz:module-202:best"] == "" and records[2]["quiz:module-202:attempts"] == "0"


def test_exercise_sets_count_solved_and_tried_parts(session: Session, klass: Klass) -> None:
    from app.exercises import progress

    ada = next(r.student for r in gradebook.build(session=session, ctx=ctx()).rows if r.student.username == "ada")
    progress.answer_part("ex-26-1", "a-global-batch", ada.id, "2048", session=session, now=T0)
    progress.answer_part("ex-26-1", "a-sync-steps", ada.id, "1", session=session, now=T0)  # tried, wrong
    session.commit()
    book = gradebook.build(session=session, ctx=ctx())
    column = next(c for c in book.columns if c.key == "exercises:ch26-exercises")
    assert column.group == "Exercises" and column.max_score and column.max_score > 10
    row = next(r for r in book.rows if r.student.username == "ada")
    assert row.cell("exercises:ch26-exercises") == gradebook.Cell(1, 2, 0)
    record = next(r for r in exports.gradebook_records(book) if r["student"] == "ada")
    assert record["exercises:ch26-exercises:best"] == 1 and record["exercises:ch26-exercises:parts_tried"] == 2


def test_parts_given_up_are_shown_apart_from_solved_ones(session: Session, klass: Klass, client: TestClient) -> None:
    progress.answer_part("ex-26-1", "a-global-batch", klass.ada.id, "2048", session=session, now=T0)
    progress.answer_part("ex-26-1", "a-sync-steps", klass.ada.id, "1", session=session, now=T0)
    progress.give_up_part("ex-26-1", "a-sync-steps", klass.ada.id, session=session, now=T0 + timedelta(minutes=1))
    progress.answer_part("ex-26-1", "a-sync-steps", klass.ada.id, "625", session=session, now=T0 + timedelta(2))
    session.commit()
    book = gradebook.build(session=session, ctx=ctx())
    row = next(r for r in book.rows if r.student.username == "ada")
    assert row.cell("exercises:ch26-exercises") == gradebook.Cell(1, 2, 0, gave_up=1)
    record = next(r for r in exports.gradebook_records(book) if r["student"] == "ada")
    assert record["exercises:ch26-exercises:best"] == 1 and record["exercises:ch26-exercises:gave_up"] == 1
    assert "exercises:ch26-exercises:gave_up" in exports.gradebook_fields(book.columns)
    assert "quiz:module-202:gave_up" not in exports.gradebook_fields(book.columns)
    sign_in(client, "prof")
    page = client.get("/instructor/gradebook").text
    ada = page.split('<tr data-student="ada">', 1)[1].split("</tr>", 1)[0]
    assert '<span class="badge badge-gave-up">gave up 1</span>' in ada
    csv_text = client.get("/instructor/gradebook.csv").text
    header, *rows = list(csv.reader(io.StringIO(csv_text)))
    ada_row = next(r for r in rows if r[0] == "ada")
    assert ada_row[header.index("exercises:ch26-exercises:gave_up")] == "1"


def test_a_run_that_stopped_early_counts_with_the_points_it_earned(session: Session, klass: Klass) -> None:
    # The checks judged before the code stopped (a time limit, a crash) earned points: the student sees
    # "3/10" on the run, and the gradebook, the labs page and the overview take it as a best like any other.
    bob = klass.bob
    make_submission(session, bob.id, "ring-allreduce", score=3, status=SubmissionStatus.failed, submitted_at=T0)
    book = gradebook.build(session=session, ctx=ctx())
    assert book.rows[1].cell("lab:ring-allreduce") == gradebook.Cell(3, 2, 0)
    assert lab_best_scores(bob.id, ["ring-allreduce"], session=session) == {"ring-allreduce": (3, 10)}


def test_staff_choose_which_kinds_of_column_to_show(session: Session, klass: Klass, client: TestClient) -> None:
    labs_only = gradebook.build(session=session, ctx=ctx(), show=["Labs", "Nonsense"])
    assert {c.group for c in labs_only.columns} == {"Labs"} and labs_only.shown == ("Labs",)
    assert labs_only.available == ("Quizzes", "Labs", "Exercises", "Flashcards")
    ada = next(r for r in labs_only.rows if r.student.username == "ada")
    assert ada.cell("lab:ring-allreduce") == gradebook.Cell(10, 2, 0) and "quiz:module-202" not in ada.cells
    # Sorting by a column that is not shown sorts by name; the choice stays in every link.
    hidden = gradebook.build(session=session, ctx=ctx(), show=["Labs"], sort="quiz:module-202")
    assert hidden.sort == "name"
    assert labs_only.url(page=2) == "/instructor/gradebook?show=Labs&page=2"
    assert (
        gradebook.build(session=session, ctx=ctx(), show=[]).columns
        == gradebook.build(session=session, ctx=ctx()).columns
    )
    sign_in(client, "prof")
    page = client.get("/instructor/gradebook?show=Labs&show=Flashcards").text
    assert 'data-column="lab:ring-allreduce"' in page and 'data-column="quiz:ch35-quiz"' not in page
    assert 'value="Labs" checked' in page and 'value="Quizzes" checked' not in page  # the choice, as ticked


def test_counts_read_as_words(session: Session, klass: Klass, client: TestClient) -> None:
    column = gradebook.Column("exercises:x", "Exercises", "X", "parts_tried")
    assert [column.count_words(n) for n in (1, 3)] == ["1 part tried", "3 parts tried"]
    attempts = gradebook.Column("quiz:x", "Quizzes", "X", "attempts")
    assert [attempts.count_words(n) for n in (1, 2)] == ["1 attempt", "2 attempts"]
    sign_in(client, "prof")
    assert "parts_tried" not in client.get("/instructor/gradebook").text
