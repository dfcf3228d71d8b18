"""The gradebook: one row per student, one column per quiz, per lab and per flashcard figure.

Columns come from *sources* (``SOURCES``), each of which names its columns and fills its cells
for a set of students with a few grouped queries (never one query per student). A new kind of
column is a new source (``ExerciseSetSource``: each exercise set's solved answer parts).

Column keys are stable (``quiz:<quiz-id>``, ``lab:<lab-id>``, ``exercises:<set-id>``, ``flashcards:reviews`` …): they
name the sort order, and the CSV and JSON fields (docs/instructors/class.md).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Protocol
from urllib.parse import urlencode

from sqlalchemy import case, func, select, true
from sqlalchemy.orm import Session

from app.accounts.models import User
from app.content.records import Exercise, ExerciseSet, Question, Quiz
from app.courses.models import CourseRole, Enrollment
from app.exercises.models import PartProgress
from app.exercises.progress import GAVE_UP, SOLVED
from app.flashcards.models import NEW, REVIEW, CardState, Review
from app.instructors.course_context import Context
from app.labs import catalog
from app.labs.models import SCORED, Submission
from app.quizzes.models import QuizAttempt

PER_PAGE = 50


@dataclass(frozen=True)
class Column:
    key: str  # stable: the sort key and the stem of the CSV/JSON field names
    group: str  # "Quizzes", "Labs", "Flashcards"
    title: str
    count_label: str | None = None  # "attempts" / "submissions": a best score with a count; None: one figure
    max_score: int | None = None
    due_at: datetime | None = None
    percent: bool = False  # the figure is a fraction shown as a percentage
    gave_up: bool = False  # the cells also count parts the student gave up on (exercise sets)

    def count_words(self, n: int) -> str:
        """The count as a page says it: "1 attempt", "3 parts tried" (``count_label`` is a field name)."""
        many = (self.count_label or "").replace("_", " ")
        one = SINGULAR.get(many, many.removesuffix("s"))
        return f"{n} {one if n == 1 else many}"


SINGULAR = {"parts tried": "part tried"}  # where dropping the last "s" is not English


@dataclass(frozen=True)
class Cell:
    value: float | None  # the best score, or the figure
    count: int = 0  # attempts / submissions
    late: int = 0  # of them, after the due date
    gave_up: int = 0  # exercise parts the student gave up on ("Show the answer"): tried, never solved
    # An extension in force (app.courses.extensions): the student's own due date and extra attempts.
    extended: bool = False
    due_at: datetime | None = None
    extra_attempts: int = 0


Cells = dict[tuple[int, str], Cell]  # (user id, column key) -> cell


class Source(Protocol):
    def columns(self, *, session: Session, ctx: Context) -> list[Column]: ...

    def cells(
        self, columns: Sequence[Column], user_ids: Collection[int] | None, *, session: Session, ctx: Context
    ) -> Cells:
        """Cells of ``columns`` for ``user_ids`` (every student when None); missing cells are empty."""
        ...


def _for_users(query, column, user_ids: Collection[int] | None):  # type: ignore[no-untyped-def]
    return query if user_ids is None else query.where(column.in_(list(user_ids)))


def _late_count(item: Any, at: Any, columns: Sequence[Column], prefix: str) -> Any:
    """How many of a student's rows came after their column's due date (the course's)."""
    dues = [(c.key.removeprefix(prefix), c.due_at) for c in columns if c.due_at is not None]
    if not dues:
        return func.sum(0)
    return func.sum(case(*(((item == key) & (at > due), 1) for key, due in dues), else_=0))


def _extended(
    cells: Cells, columns: Sequence[Column], user_ids: Collection[int] | None, model: Any, item: Any, at: Any,
    counted: Any, *, session: Session, ctx: Context,
) -> Cells:  # fmt: skip
    """Cells of students with an extension in force: marked, and late counted against their own due date.

    Two queries whatever the number of grants: the grants, then the times of those students' rows.
    """
    prefix = "quiz:" if model is QuizAttempt else "lab:"
    keys, users = {c.key for c in columns}, None if user_ids is None else set(user_ids)
    grants = {
        (uid, key): g
        for (uid, key), g in ctx.grants(session).items()
        if key in keys and (users is None or uid in users)
    }
    dated = {(uid, key.removeprefix(prefix)): g.due_at for (uid, key), g in grants.items() if g.due_at is not None}
    late: dict[tuple[int, str], int] = {}
    if dated:
        rows = session.execute(
            select(model.user_id, item, at).where(
                model.user_id.in_({uid for uid, _ in dated}),
                item.in_({i for _, i in dated}),
                model.course_id == ctx.course_id,
                counted,
            )
        )
        for uid, item_id, when in rows:
            due = dated.get((uid, item_id))
            if due is not None:
                late[(uid, item_id)] = late.get((uid, item_id), 0) + (when > due)
    for (uid, key), grant in grants.items():
        cell = cells.get((uid, key), EMPTY)
        lateness = late.get((uid, key.removeprefix(prefix)), 0) if grant.due_at is not None else cell.late
        cells[(uid, key)] = replace(
            cell, late=lateness, extended=True, due_at=grant.due_at, extra_attempts=grant.extra_attempts
        )
    return cells


class QuizSource:
    """Per quiz: best score, submitted attempts, and how many of them were late."""

    def columns(self, *, session: Session, ctx: Context) -> list[Column]:
        counts = dict(
            session.execute(
                select(Question.quiz_id, func.count()).where(Question.retired_at.is_(None)).group_by(Question.quiz_id)
            ).all()
        )
        quizzes = session.scalars(select(Quiz).where(Quiz.retired_at.is_(None)).order_by(Quiz.position))
        return [
            Column(f"quiz:{q.id}", "Quizzes", q.title, "attempts", counts.get(q.id, 0), ctx.due("quiz", q.id, q.due_at))
            for q in quizzes
            if ctx.assigned("quiz", q.id)
        ]

    def cells(
        self, columns: Sequence[Column], user_ids: Collection[int] | None, *, session: Session, ctx: Context
    ) -> Cells:
        ids = [c.key.removeprefix("quiz:") for c in columns]
        if not ids:
            return {}
        A = QuizAttempt
        late = _late_count(A.quiz_id, A.submitted_at, columns, "quiz:")
        query = (
            select(A.user_id, A.quiz_id, func.max(A.score), func.count(), late)
            .where(A.quiz_id.in_(ids), A.submitted_at.is_not(None), A.course_id == ctx.course_id)
            .group_by(A.user_id, A.quiz_id)
        )
        rows = session.execute(_for_users(query, A.user_id, user_ids)).all()
        cells = {(uid, f"quiz:{qid}"): Cell(best, n, int(lt or 0)) for uid, qid, best, n, lt in rows}
        return _extended(
            cells,
            columns,
            user_ids,
            A,
            A.quiz_id,
            A.submitted_at,
            A.submitted_at.is_not(None),
            session=session,
            ctx=ctx,
        )


class LabSource:
    """Per lab: best graded score, submissions, and how many of them were late."""

    def columns(self, *, session: Session, ctx: Context) -> list[Column]:
        return [
            Column(
                f"lab:{lab.id}",
                "Labs",
                lab.spec.title,
                "submissions",
                lab.spec.max_score,
                ctx.due("lab", lab.id, lab.spec.due),
            )
            for lab in catalog.all_labs(session).values()
            if ctx.assigned("lab", lab.id)
        ]

    def cells(
        self, columns: Sequence[Column], user_ids: Collection[int] | None, *, session: Session, ctx: Context
    ) -> Cells:
        ids = [c.key.removeprefix("lab:") for c in columns]
        if not ids:
            return {}
        S = Submission
        late = _late_count(S.lab_id, S.submitted_at, columns, "lab:")
        best = func.max(case((S.status.in_(SCORED), S.score), else_=None))
        query = (
            select(S.user_id, S.lab_id, best, func.count(), late)
            .where(S.lab_id.in_(ids), S.course_id == ctx.course_id)
            .group_by(S.user_id, S.lab_id)
        )
        rows = session.execute(_for_users(query, S.user_id, user_ids)).all()
        cells = {(uid, f"lab:{lid}"): Cell(b, n, int(lt or 0)) for uid, lid, b, n, lt in rows}
        return _extended(cells, columns, user_ids, S, S.lab_id, S.submitted_at, true(), session=session, ctx=ctx)


FLASHCARD_COLUMNS = (
    Column("flashcards:reviews", "Flashcards", "Reviews"),
    Column("flashcards:true_retention", "Flashcards", "True retention", percent=True),
    Column("flashcards:cards_due", "Flashcards", "Cards due"),
)


class FlashcardSource:
    """Reviews (not undone), true retention (reviews of cards in review not rated Again), review cards due now."""

    def columns(self, *, session: Session, ctx: Context) -> list[Column]:
        return list(FLASHCARD_COLUMNS)

    def cells(
        self, columns: Sequence[Column], user_ids: Collection[int] | None, *, session: Session, ctx: Context
    ) -> Cells:
        out: Cells = {}
        graded = Review.state_before == REVIEW
        reviews = (
            select(
                Review.user_id,
                func.count(),
                func.sum(case((graded, 1), else_=0)),
                func.sum(case((graded & (Review.rating > 1), 1), else_=0)),
            )
            .where(Review.undone_at.is_(None), Review.course_id == ctx.course_id)
            .group_by(Review.user_id)
        )
        for uid, n, total, passed in session.execute(_for_users(reviews, Review.user_id, user_ids)):
            out[(uid, "flashcards:reviews")] = Cell(n)
            out[(uid, "flashcards:true_retention")] = Cell(passed / total if total else None)
        now = ctx.now
        due = (
            select(CardState.user_id, func.count())
            .where(
                CardState.state != NEW,
                CardState.suspended.is_(False),
                CardState.due <= now,
                (CardState.buried_until.is_(None)) | (CardState.buried_until <= now),
            )
            .group_by(CardState.user_id)
        )
        for uid, n in session.execute(_for_users(due, CardState.user_id, user_ids)):
            out[(uid, "flashcards:cards_due")] = Cell(n)
        return out


class ExerciseSetSource:
    """Per exercise set with answer parts: parts solved (of all its parts), parts tried, parts given up."""

    def columns(self, *, session: Session, ctx: Context) -> list[Column]:
        sets = session.scalars(select(ExerciseSet).where(ExerciseSet.retired_at.is_(None)).order_by(ExerciseSet.id))
        parts = self._part_counts(session)
        return [
            Column(f"exercises:{s.id}", "Exercises", s.title, "parts_tried", parts[s.id], gave_up=True)
            for s in sets
            if parts.get(s.id) and ctx.assigned("exercises", s.id)
        ]

    @staticmethod
    def _part_counts(session: Session) -> dict[str, int]:
        counts: dict[str, int] = {}
        for set_id, parts in session.execute(
            select(Exercise.set_id, Exercise.parts).where(Exercise.retired_at.is_(None))
        ):
            counts[set_id] = counts.get(set_id, 0) + len(parts or [])
        return counts

    def cells(
        self, columns: Sequence[Column], user_ids: Collection[int] | None, *, session: Session, ctx: Context
    ) -> Cells:
        ids = [c.key.removeprefix("exercises:") for c in columns]
        if not ids:
            return {}
        P = PartProgress
        solved = func.sum(case((SOLVED, 1), else_=0))
        tried = func.sum(case(((P.attempts > 0) | P.solved_at.is_not(None) | P.given_up_at.is_not(None), 1), else_=0))
        gave_up = func.sum(case((GAVE_UP, 1), else_=0))
        query = (
            select(P.user_id, Exercise.set_id, solved, tried, gave_up)
            .join(Exercise, Exercise.id == P.exercise_id)
            .where(Exercise.set_id.in_(ids))
            .group_by(P.user_id, Exercise.set_id)
        )
        rows = session.execute(_for_users(query, P.user_id, user_ids)).all()
        return {
            (uid, f"exercises:{sid}"): Cell(int(n or 0), int(t or 0), gave_up=int(g or 0)) for uid, sid, n, t, g in rows
        }


SOURCES: tuple[Source, ...] = (QuizSource(), LabSource(), ExerciseSetSource(), FlashcardSource())


@dataclass(frozen=True)
class Student:
    id: int
    username: str


@dataclass(frozen=True)
class Row:
    student: Student
    cells: dict[str, Cell]

    def cell(self, key: str) -> Cell:
        return self.cells.get(key) or EMPTY


EMPTY = Cell(None)


@dataclass
class Gradebook:
    columns: list[Column]
    rows: list[Row]
    total: int  # students matching the filter
    page: int = 1
    per_page: int = PER_PAGE
    sort: str = "name"
    descending: bool = False
    query: str = ""
    groups: list[tuple[str, int]] = field(default_factory=list)  # (group, column count), for the header
    shown: tuple[str, ...] = ()  # the groups chosen (``show``); empty: every group
    available: tuple[str, ...] = ()  # every group there are columns of, to choose from

    @property
    def pages(self) -> int:
        return max(1, math.ceil(self.total / self.per_page))

    def url(self, *, sort: str | None = None, descending: bool | None = None, page: int = 1) -> str:
        """This gradebook's address with the filter kept and ``sort``/``descending``/``page`` changed."""
        values = {
            "q": self.query,
            "sort": self.sort if sort is None else sort,
            "desc": "true" if (self.descending if descending is None else descending) else "",
            "page": page if page != 1 else "",
        }
        pairs = [(k, v) for k, v in values.items() if v != "" and not (k == "sort" and v == "name")]
        first = [p for p in pairs if p[0] == "q"]  # the filter, then the columns shown, then the order and page
        query = urlencode([*first, *(("show", g) for g in self.shown), *(p for p in pairs if p[0] != "q")])
        return f"/instructor/gradebook?{query}" if query else "/instructor/gradebook"

    def sort_url(self, key: str) -> str:
        """Sort by ``key``; again on the current column flips the order. Scores sort highest first."""
        if key == self.sort:
            return self.url(descending=not self.descending)
        return self.url(sort=key, descending=key != "name")


def _groups(columns: Sequence[Column]) -> list[tuple[str, int]]:
    groups: list[tuple[str, int]] = []
    for c in columns:
        if groups and groups[-1][0] == c.group:
            groups[-1] = (c.group, groups[-1][1] + 1)
        else:
            groups.append((c.group, 1))
    return groups


def sort_rows(rows: list[Row], sort: str, descending: bool) -> list[Row]:
    """By name, or by a column's value; students without a value always come last."""
    if sort == "name":
        return sorted(rows, key=lambda r: r.student.username.lower(), reverse=descending)
    by_name = sorted(rows, key=lambda r: r.student.username.lower())
    valued = [r for r in by_name if r.cell(sort).value is not None]
    empty = [r for r in by_name if r.cell(sort).value is None]
    valued.sort(key=lambda r: r.cell(sort).value or 0.0, reverse=descending)
    return valued + empty


def build(
    *,
    session: Session,
    ctx: Context,
    query: str = "",
    sort: str = "name",
    descending: bool = False,
    page: int = 1,
    per_page: int | None = PER_PAGE,
    sources: Sequence[Source] = SOURCES,
    show: Collection[str] = (),
) -> Gradebook:
    """The gradebook of the students whose name contains ``query``, sorted, one page of it.

    ``per_page=None`` gives every row (the exports). Sorted by name, only the page's students
    are looked up; sorted by a column, that column is computed for every matching student first.
    ``show`` keeps the columns of those groups only (unknown names are ignored; none: every group), and
    only their cells are computed.
    """
    per_source = [(src, src.columns(session=session, ctx=ctx)) for src in sources]
    available = tuple(dict.fromkeys(c.group for _, cols in per_source for c in cols))
    shown = tuple(g for g in available if g in set(show))
    if shown:
        per_source = [(src, [c for c in cols if c.group in shown]) for src, cols in per_source]
    columns = [c for _, cols in per_source for c in cols]
    if sort != "name" and sort not in {c.key for c in columns}:
        sort = "name"
    students = (
        select(User.id, User.username)
        .join(Enrollment, Enrollment.user_id == User.id)
        .where(Enrollment.course_id == ctx.course_id, Enrollment.role == CourseRole.student)
    )
    if query.strip():
        students = students.where(User.username_key.contains(query.strip().lower(), autoescape=True))
    total = int(session.scalar(select(func.count()).select_from(students.subquery())) or 0)
    size = per_page or max(total, 1)
    pages = max(1, math.ceil(total / size))
    page = min(max(page, 1), pages)
    order = User.username_key.desc() if descending else User.username_key
    if sort == "name":
        chosen = session.execute(students.order_by(order).offset((page - 1) * size).limit(size)).all()
        everyone = [Student(uid, name) for uid, name in chosen]
        ids: Collection[int] | None = [s.id for s in everyone] if per_page is not None or query.strip() else None
    else:
        everyone = [Student(uid, name) for uid, name in session.execute(students.order_by(User.username_key))]
        ids = [s.id for s in everyone] if query.strip() else None
        src, cols = next((src, cols) for src, cols in per_source if any(c.key == sort for c in cols))
        sorted_cells = src.cells([c for c in cols if c.key == sort], ids, session=session, ctx=ctx)
        ranked = sort_rows([Row(s, {sort: sorted_cells.get((s.id, sort), EMPTY)}) for s in everyone], sort, descending)
        everyone = [r.student for r in ranked[(page - 1) * size : page * size]]
        ids = [s.id for s in everyone] if per_page is not None else ids
    cells: Cells = {}
    for src, cols in per_source:
        if cols:  # a group not shown costs no query
            cells.update(src.cells(cols, ids, session=session, ctx=ctx))
    rows = [Row(s, {c.key: cells[(s.id, c.key)] for c in columns if (s.id, c.key) in cells}) for s in everyone]
    return Gradebook(columns, rows, total, page, size, sort, descending, query, _groups(columns), shown, available)
