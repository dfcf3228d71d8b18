"""Quiz queries for pages and the API. Answers and explanations stay on the server until an attempt is submitted.

Open attempts are shown through ``QuestionView``, which has no field for the answer or the
explanation, so no template or API response of an open attempt can leak them by mistake.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, or_, select
from sqlalchemy.orm import Session

from app.content.errata import notes_markdown
from app.content.records import Card, Course, Question, Quiz
from app.courses import extensions
from app.courses import policy as courses_policy
from app.errors import NotFound
from app.quizzes import attempts, countdown, policy, rescore, scoring, statistics
from app.quizzes.models import QuizAttempt


@dataclass(frozen=True)
class QuizSummary:
    quiz: Quiz
    question_count: int
    section_counts: dict[str, int]
    # The course's terms for the student (its due date, with their extension); None: the quiz's own.
    terms: courses_policy.Terms | None = None

    @property
    def due_at(self) -> datetime | None:
        return self.terms.due_at if self.terms else self.quiz.due_at

    @property
    def max_attempts(self) -> int | None:
        return self.terms.max_attempts if self.terms else self.quiz.max_attempts

    @property
    def show_answers(self) -> str:
        return (self.terms.show_answers if self.terms else None) or self.quiz.show_answers

    @property
    def closes(self) -> bool:
        """The quiz takes no attempt after the due date (the course's ``late: refuse``)."""
        return bool(self.terms and self.terms.late == "refuse")

    @property
    def pass_mark(self) -> int | None:
        return scoring.pass_mark(self.quiz.passing_score, self.question_count)


def _live_questions(quiz_id: str):  # type: ignore[no-untyped-def]
    return select(Question).where(Question.quiz_id == quiz_id, Question.retired_at.is_(None))


def _terms(quiz: Quiz, course_id: str | None, user_id: int | None, session: Session) -> courses_policy.Terms | None:
    if course_id is None:
        return None
    own = courses_policy.Own(quiz.due_at, quiz.max_attempts, quiz.show_answers)
    if user_id is None:
        assignments = session.scalar(select(Course.assignments).where(Course.id == course_id))
        return courses_policy.terms(courses_policy.assignment(assignments, "quiz", quiz.id), own)
    return extensions.terms_for(course_id, user_id, "quiz", quiz.id, own, session=session)


def list_quizzes(*, session: Session, course_id: str | None = None, user_id: int | None = None) -> list[QuizSummary]:
    """The live quizzes; with ``course_id``, those the course assigns, with its terms (for ``user_id``)."""
    counts = dict(
        session.execute(
            select(Question.quiz_id, func.count()).where(Question.retired_at.is_(None)).group_by(Question.quiz_id)
        ).all()
    )
    quizzes = session.scalars(select(Quiz).where(Quiz.retired_at.is_(None)).order_by(Quiz.position))
    out = [QuizSummary(q, counts.get(q.id, 0), {}, _terms(q, course_id, user_id, session)) for q in quizzes]
    return [s for s in out if s.terms is None or s.terms.assigned]


def get_quiz(
    quiz_id: str, *, session: Session, course_id: str | None = None, user_id: int | None = None
) -> QuizSummary:
    """The quiz with its question counts; with ``course_id``, the course's terms (for ``user_id``)."""
    quiz = session.get(Quiz, quiz_id)
    if quiz is None or quiz.retired_at is not None:
        raise NotFound(f"No quiz '{quiz_id}'.")
    section_counts: dict[str, int] = {}
    for question in session.scalars(_live_questions(quiz_id)):
        key = question.section_id or ""
        section_counts[key] = section_counts.get(key, 0) + 1
    return QuizSummary(quiz, sum(section_counts.values()), section_counts, _terms(quiz, course_id, user_id, session))


def history(
    quiz_id: str, user_id: int, *, session: Session, now: datetime, course_id: str | None = None
) -> list[QuizAttempt]:
    """The student's attempts at a quiz (in ``course_id``), newest first; any past its deadline is submitted first."""
    mine = [QuizAttempt.quiz_id == quiz_id, QuizAttempt.user_id == user_id]
    if course_id is not None:
        mine.append(QuizAttempt.course_id == course_id)
    rows = session.scalars(
        select(QuizAttempt).where(*mine).order_by(QuizAttempt.started_at.desc(), QuizAttempt.id.desc())
    ).all()
    for row in rows:
        if row.is_open and row.deadline is not None and now >= row.deadline:
            attempts.get_attempt(row.id, user_id, session=session, now=now)
    return list(rows)


def quizzes_open(user_id: int, *, session: Session, now: datetime | None = None) -> int:
    """How many attempts the student has in progress (open and not past their deadline)."""
    query = (
        select(func.count())
        .select_from(QuizAttempt)
        .where(QuizAttempt.user_id == user_id, QuizAttempt.submitted_at.is_(None))
    )
    if now is not None:
        query = query.where(or_(QuizAttempt.deadline.is_(None), QuizAttempt.deadline > now))
    return int(session.scalar(query) or 0)


@dataclass(frozen=True)
class OptionView:
    """One option as shown: ``key`` is its authored letter (stored, scored, sent back by the form);
    ``label`` is the letter the student sees, A, B, C... in the order shown, whatever the shuffle."""

    key: str
    html: str
    text: str
    label: str


@dataclass(frozen=True)
class QuestionView:
    """A question as a student sees it while answering: no answer, no explanation."""

    id: str
    number: int
    section_id: str | None
    section_title: str | None
    prompt_html: str
    prompt_text: str
    options: tuple[OptionView, ...]

    def label_of(self, key: str | None) -> str:
        """The shown letter of the option with authored ``key`` ("" for none or an unknown key)."""
        return next((o.label for o in self.options if o.key == key), "")


def shown_label(position: int) -> str:
    """The letter shown for the option at ``position`` (0-based) of the shown order: A, B, C..."""
    return string.ascii_uppercase[position] if position < 26 else str(position + 1)


def _views(quiz: Quiz, attempt: QuizAttempt, questions: list[Question]) -> list[QuestionView]:
    titles = {s["id"]: s["title"] for s in quiz.sections}
    views = []
    for number, q in enumerate(questions, start=1):
        texts = {o["key"]: o["text"] for o in q.source.get("options", [])}
        htmls = {o["key"]: o["html"] for o in q.options}
        order = scoring.option_order(list(htmls), seed=attempt.seed, question_id=q.id, shuffle=quiz.shuffle_options)
        views.append(
            QuestionView(
                id=q.id,
                number=number,
                section_id=q.section_id,
                section_title=titles.get(q.section_id or ""),
                prompt_html=q.prompt_html,
                prompt_text=q.source.get("prompt", ""),
                options=tuple(OptionView(k, htmls[k], texts.get(k, ""), shown_label(n)) for n, k in enumerate(order)),
            )
        )
    return views


@dataclass(frozen=True)
class AttemptPage:
    attempt: QuizAttempt
    quiz: Quiz
    questions: tuple[QuestionView, ...]
    choices: dict[str, str]
    now: datetime

    @property
    def unanswered(self) -> list[QuestionView]:
        return [q for q in self.questions if q.id not in self.choices]

    @property
    def resume_number(self) -> int:
        """Where a resumed attempt opens: the first unanswered question, else the last one."""
        return attempts.resume_number([q.id for q in self.questions], self.choices)

    @property
    def seconds_left(self) -> int | None:
        if self.attempt.deadline is None:
            return None
        return max(0, int((self.attempt.deadline - self.now).total_seconds()))

    @property
    def limit_seconds(self) -> int | None:
        """The student's own time limit (any accommodation included), as fixed when the attempt started."""
        if self.attempt.deadline is None:
            return None
        return int((self.attempt.deadline - self.attempt.started_at).total_seconds())

    @property
    def announce_at(self) -> tuple[int, ...]:
        """Seconds-left marks at which the page announces the time left (``countdown.announce_at``)."""
        return countdown.announce_at(self.limit_seconds) if self.limit_seconds else ()

    @property
    def warn_at(self) -> int | None:
        """Seconds left from which the page shows a written warning (``countdown.warn_at``)."""
        return countdown.warn_at(self.limit_seconds) if self.limit_seconds else None

    def question(self, number: int) -> QuestionView:
        """Question ``number`` (1-based), clamped to the attempt's range."""
        return self.questions[min(max(number, 1), len(self.questions)) - 1]

    def sections(self) -> list[tuple[str | None, list[QuestionView]]]:
        """Questions grouped by section, in order, for the overview."""
        groups: list[tuple[str | None, list[QuestionView]]] = []
        for q in self.questions:
            if not groups or groups[-1][0] != q.section_title:
                groups.append((q.section_title, []))
            groups[-1][1].append(q)
        return groups


def attempt_page(attempt: QuizAttempt, *, session: Session, now: datetime) -> AttemptPage:
    quiz = session.get(Quiz, attempt.quiz_id)
    assert quiz is not None
    questions = attempts.questions_of(attempt, session=session)
    choices = attempts.choices_of(attempt, session=session)
    return AttemptPage(attempt, quiz, tuple(_views(quiz, attempt, questions)), choices, now)


@dataclass(frozen=True)
class ReviewItem:
    question: QuestionView
    choice: str | None
    answer: str
    correct: bool
    explanation_html: str
    explanation_text: str
    cards: tuple[Card, ...] = ()  # the flashcards that teach this question (its ``cards:``)


@dataclass(frozen=True)
class RescoreView:
    """A re-marking of the attempt after a corrected key. While the key is hidden, only the scores
    and the date show: ``question``, the keys and the note are blanked."""

    question: QuestionView | None
    old_answer: str
    new_answer: str
    choice: str | None
    old_score: int
    new_score: int
    max_score: int
    note_html: str
    rescored_at: datetime


@dataclass(frozen=True)
class ResultPage:
    attempt: QuizAttempt
    quiz: Quiz
    result: dict[str, Any]
    items: tuple[ReviewItem, ...]
    pass_mark: int | None
    key_shown: bool = True  # the quiz's show_answers policy; an instructor always sees the key
    late: bool = False
    student: str | None = None  # set when an instructor reviews someone else's attempt
    rescores: tuple[RescoreView, ...] = ()
    reveal: str = "at_once"  # when the key shows, as the course (else the quiz) says
    reveal_at: datetime | None = None  # the due date it waits for ("after_due")


def result_page(attempt: QuizAttempt, *, session: Session, now: datetime, reviewer: bool = False) -> ResultPage:
    """The submitted attempt's frozen result with every question to review.

    The key and explanations are included only where the quiz's policy allows it at ``now``
    (or for an instructor, ``reviewer``); a page or API response built from a hidden-key
    page must not show ``answer``, ``correct`` or ``explanation_*``.
    """
    if attempt.result is None:
        raise attempts.AttemptClosed("This attempt is still open; submit it to see the result.")
    quiz = session.get(Quiz, attempt.quiz_id)
    assert quiz is not None
    questions = attempts.questions_of(attempt, session=session)
    by_id = {q.id: q for q in questions}
    views = {v.id: v for v in _views(quiz, attempt, questions)}
    wanted = {c for q in questions for c in (q.card_ids or [])}
    live = {c.id: c for c in session.scalars(select(Card).where(Card.id.in_(wanted), Card.retired_at.is_(None)))}
    items = tuple(
        ReviewItem(
            views[m["id"]],
            m["choice"],
            m["answer"],
            m["correct"],
            by_id[m["id"]].explanation_html,
            by_id[m["id"]].source.get("explanation", "") + notes_markdown(by_id[m["id"]].source.get("errata", [])),
            tuple(live[c] for c in (by_id[m["id"]].card_ids or []) if c in live),
        )
        for m in attempt.result["marks"]
        if m["id"] in views
    )
    result = attempt.result
    own = courses_policy.Own(quiz.due_at, quiz.max_attempts, quiz.show_answers)
    terms = extensions.terms_for(attempt.course_id, attempt.user_id, "quiz", quiz.id, own, session=session)
    shown = reviewer or policy.key_visible(terms.show_answers or "at_once", terms.course_due_at, now)
    if not shown:
        items = tuple(ReviewItem(i.question, i.choice, "", False, "", "") for i in items)
    rescores = tuple(
        RescoreView(views.get(x.question_id), x.old_answer, x.new_answer, x.choice, x.old_score, x.new_score,
                    x.max_score, x.note_html, x.rescored_at)
        if shown
        else RescoreView(None, "", "", None, x.old_score, x.new_score, x.max_score, "", x.rescored_at)
        for x in rescore.rescores_of(attempt.id, session=session)
    )  # fmt: skip
    return ResultPage(
        attempt, quiz, result, items, scoring.pass_mark(quiz.passing_score, result["max_score"]),
        key_shown=shown, late=terms.is_late(attempt.submitted_at), rescores=rescores,
        reveal=terms.show_answers or "at_once", reveal_at=terms.course_due_at,
    )  # fmt: skip


@dataclass(frozen=True)
class CardToReview:
    card_id: str
    question_id: str
    attempt_id: int
    flagged_at: datetime


def hidden_keys(pairs: set[tuple[str, str]], *, session: Session, now: datetime) -> set[tuple[str, str]]:
    """The (quiz, course) pairs among ``pairs`` whose answer key students may not see at ``now``.

    The course decides when (its ``show_answers`` and due date for the quiz), else the quiz's own file.
    """
    quizzes = {
        qid: courses_policy.Own(due, None, show)
        for qid, show, due in session.execute(
            select(Quiz.id, Quiz.show_answers, Quiz.due_at).where(Quiz.id.in_({q for q, _ in pairs}))
        )
    }
    plans: dict[str, Any] = dict(
        session.execute(select(Course.id, Course.assignments).where(Course.id.in_({c for _, c in pairs}))).all()
    )
    hidden = set()
    for quiz_id, course_id in pairs:
        if quiz_id not in quizzes:
            continue
        terms = courses_policy.terms(courses_policy.assignment(plans.get(course_id), "quiz", quiz_id), quizzes[quiz_id])
        if not policy.key_visible(terms.show_answers or "at_once", terms.course_due_at, now):
            hidden.add((quiz_id, course_id))
    return hidden


def cards_to_review(
    user_id: int, *, session: Session, since: datetime | None = None, now: datetime | None = None
) -> list[CardToReview]:
    """Flashcards named by questions the student got wrong (or left blank) in submitted attempts.

    Newest first, one entry per card; ``since`` keeps only attempts submitted after it. The
    flashcard scheduler can make these cards due.
    """
    query = select(QuizAttempt).where(QuizAttempt.user_id == user_id, QuizAttempt.result.is_not(None))
    if since is not None:
        query = query.where(QuizAttempt.submitted_at > since)
    rows = session.scalars(query.order_by(QuizAttempt.submitted_at.desc(), QuizAttempt.id.desc())).all()
    # Which questions were missed is part of the key: none while the quiz's policy hides it.
    hidden = hidden_keys({(a.quiz_id, a.course_id) for a in rows}, session=session, now=now or datetime.now(UTC))
    rows = [a for a in rows if (a.quiz_id, a.course_id) not in hidden]
    missed = {(a.id, m["id"]) for a in rows for m in (a.result or {}).get("marks", []) if not m["correct"]}
    cards_of = dict(
        session.execute(select(Question.id, Question.card_ids).where(Question.id.in_({q for _, q in missed}))).all()
    )
    seen: dict[str, CardToReview] = {}
    for attempt in rows:
        for mark in (attempt.result or {}).get("marks", []):
            if (attempt.id, mark["id"]) not in missed:
                continue
            for card in cards_of.get(mark["id"]) or []:
                if card not in seen and attempt.submitted_at is not None:
                    seen[card] = CardToReview(card, mark["id"], attempt.id, attempt.submitted_at)
    return list(seen.values())


@dataclass(frozen=True)
class StatisticsPage:
    stats: statistics.QuizStats
    questions: dict[str, Question]  # by id: each item's text and options, next to its figures
    all_attempts: bool
    shuffled: bool = False  # students saw the options shuffled and relettered; this page shows them as authored


def first_attempts(results: list[tuple[int, dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each student's first submitted result; ``results`` are (user id, result) oldest first."""
    seen: set[int] = set()
    firsts = []
    for user_id, result in results:
        if user_id not in seen:
            seen.add(user_id)
            firsts.append(result)
    return firsts


def quiz_statistics(
    quiz_id: str, *, session: Session, now: datetime, all_attempts: bool = False, course_id: str | None = None
) -> StatisticsPage:
    """Item statistics over each student's first submitted attempt (or every one with ``all_attempts``),
    in ``course_id`` (None: every course).

    First attempts by default: later attempts follow a seen key and would inflate facility.
    Expired attempts are submitted first.
    """
    summary = get_quiz(quiz_id, session=session)
    attempts.sweep_expired(session=session, now=now)
    query = select(QuizAttempt.user_id, QuizAttempt.result).where(
        QuizAttempt.quiz_id == quiz_id, QuizAttempt.result.is_not(None)
    )
    if course_id is not None:
        query = query.where(QuizAttempt.course_id == course_id)
    rows_ = session.execute(query.order_by(QuizAttempt.started_at, QuizAttempt.id)).all()
    pairs = [(uid, r) for uid, r in rows_ if r]
    results = [r for _, r in pairs] if all_attempts else first_attempts(pairs)
    rows = {q.id: q for q in session.scalars(_live_questions(quiz_id).order_by(Question.position))}
    order = scoring.question_order([(q.id, q.section_id) for q in rows.values()], summary.quiz.sections)
    items = [
        statistics.ItemInfo(qid, n, [o["key"] for o in rows[qid].options], rows[qid].answer)
        for n, qid in enumerate(order, 1)
    ]
    stats = statistics.quiz_stats(summary.quiz.title, items, results)
    return StatisticsPage(stats, rows, all_attempts, shuffled=bool(summary.quiz.shuffle_options))
