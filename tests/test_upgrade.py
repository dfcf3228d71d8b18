"""Upgrading a server of the previous release keeps every row, each in the default course, on both backends.

A database is migrated to the previous release's schema (its six ``0010_*`` heads) and filled with rows
as that release wrote them, in SQL: two students and a site-wide instructor, their quiz attempts with
answers, lab submissions, card states and reviews, exercise answers and progress, extra time, reset
links, a report. Then it is upgraded: every row of every table that was there is still there, with the
same values (only the instructor's site role changes, to admin), each student's work is in the default
course and still theirs, and each account is enrolled in the default course once. Downgrading back to
the previous release gives the same rows again. SQLite runs with foreign keys on, as the app runs it, so
a migration that copied a table (drop and re-create) would cascade to the rows that refer to it, and the
counts would say so.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from alembic import command
from sqlalchemy import Connection, inspect, select, text
from sqlalchemy.orm import Session

from app.db import make_engine
from app.migrate import alembic_config
from app.quizzes.models import QuizAttempt
from tests.conftest import BACKENDS, make_db_url

PREVIOUS = (
    "0010_exercise_giveups",
    "0010_fractional_scores",
    "0010_lab_hints",
    "0010_password_resets",
    "0010_personal_cards",
    "0010_problem_reports",
)
# Students' work: each row gets the course it was made in, "default" for everything made before courses.
WORK = ("quiz_attempts", "lab_submissions", "flashcard_reviews", "exercise_part_answers")
ANN, BEN, PROF = 1, 2, 3


class Writer:
    """Inserts rows with plain SQL, as the previous release's code left them in the database."""

    def __init__(self, conn: Connection):
        self.conn = conn
        self.sqlite = conn.dialect.name == "sqlite"

    def at(self, day: int, hour: int = 9) -> str:
        """A UTC time as the app stores it on this backend (SQLite: naive text; PostgreSQL: timestamptz)."""
        moment = datetime(2026, 3, day, hour, 0, tzinfo=UTC)
        return moment.strftime("%Y-%m-%d %H:%M:%S.%f") if self.sqlite else moment.isoformat()

    def row(self, table: str, **values: Any) -> None:
        values = {k: json.dumps(v) if isinstance(v, dict | list) else v for k, v in values.items()}
        columns = ", ".join(f'"{c}"' for c in values)
        params = ", ".join(f":{c}" for c in values)
        self.conn.execute(text(f"INSERT INTO {table} ({columns}) VALUES ({params})"), values)


def write_previous_release(conn: Connection) -> None:
    w = Writer(conn)
    t = w.at(1)
    content = {"updated_at": t, "source": {"file": "x.md"}, "retired_at": None}
    w.row("quizzes", id="q1", position=0, title="Quiz 1", description_html="", shuffle_options=False, sections=[],
          scoring_guide=[], version="1", max_attempts=2, **content)  # fmt: skip
    for n in (1, 2):
        w.row("questions", id=f"q1-{n}", quiz_id="q1", position=n, prompt_html="?", options=[{"key": "A"}],
              answer="A", explanation_html="", card_ids=[], **content)  # fmt: skip
    w.row("decks", id="d1", position=0, title="Deck", description_html="", rating_prompt="?", rating_labels=[],
          **content)  # fmt: skip
    for n in (1, 2):
        w.row("cards", id=f"d1-{n}", deck_id="d1", position=n, number=n, front_html="f", back_html="b", **content)
    w.row("exercise_sets", id="s1", position=0, title="Set", description_html="", sections=[], difficulty_legend=[],
          **content)  # fmt: skip
    w.row("exercises", id="s1-e1", set_id="s1", position=0, number="1.1", body_html="b", parts=[{"id": "p"}],
          **content)  # fmt: skip

    for uid, name, role in ((ANN, "Ann", "student"), (BEN, "ben", "student"), (PROF, "prof", "instructor")):
        w.row("users", id=uid, username=name, username_key=name.lower(), password_hash="$argon2id$x", role=role,
              created_at=w.at(1, 8))  # fmt: skip
    w.row("auth_sessions", id="a" * 64, user_id=ANN, created_at=t, expires_at=w.at(15))
    w.row("api_tokens", id="b" * 64, user_id=BEN, created_at=t, expires_at=w.at(30))
    w.row("password_resets", id="c" * 64, user_id=BEN, created_by_id=PROF, created_at=t, expires_at=w.at(2))
    w.row("auth_limit_hits", bucket="signin_account", key="d" * 32, at=t)
    w.row("lab_workers", id="w1", hostname="grader", pid=42, cpu_count=8, gpu_count=0, sandboxed=True,
          started_at=t, last_seen_at=t, graded=2, confinement="cgroup v2")  # fmt: skip

    # Quiz attempts (ann: two submitted, ben: one open) with their answers, a re-score, extra time.
    for aid, uid, day, done in ((1, ANN, 2, True), (2, BEN, 2, False), (3, ANN, 3, True)):
        w.row("quiz_attempts", id=aid, user_id=uid, quiz_id="q1", question_ids=["q1-1", "q1-2"], seed=aid,
              started_at=w.at(day), updated_at=w.at(day, 10), submitted_at=w.at(day, 10) if done else None,
              auto_submitted=False, score=1 if done else None, max_score=2 if done else None,
              passed=False if done else None, result={"score": 1} if done else None)  # fmt: skip
        for n, choice in ((1, "A"), (2, "B")):
            w.row("quiz_answers", id=aid * 10 + n, attempt_id=aid, question_id=f"q1-{n}", choice=choice,
                  answered_at=w.at(day), correct=(choice == "A") if done else None)  # fmt: skip
    w.row("quiz_rescores", attempt_id=1, question_id="q1-2", old_answer="A", new_answer="B", choice="B",
          old_score=1, new_score=2, max_score=2, note_html="", rescored_at=w.at(4))  # fmt: skip
    w.row("quiz_accommodations", user_id=BEN, time_multiplier=1.5, extra_minutes=0, note="letter",
          granted_by=PROF, granted_at=t)  # fmt: skip

    # Lab submissions: ann's graded with partial credit, ben's still queued; a hint ann opened.
    w.row("lab_submissions", id=1, user_id=ANN, lab_id="ring-allreduce", lab_version=1, code="x = 1", status="graded",
          gpus_needed=0, attempts=1, submitted_at=w.at(5), queued_at=w.at(5), finished_at=w.at(5, 10), score=7.5,
          max_score=10, verdict={"status": "ok"}, regrades=0)  # fmt: skip
    w.row("lab_submissions", id=2, user_id=BEN, lab_id="ring-allreduce", code="y = 2", status="queued",
          gpus_needed=0, attempts=0, submitted_at=w.at(6), queued_at=w.at(6), regrades=0)  # fmt: skip
    w.row("lab_hint_views", user_id=ANN, lab_id="ring-allreduce", check_id="c1", hint_index=0, shown_at=w.at(5))

    # Flashcards: settings, card states, reviews; a personal card and its review.
    w.row("flashcard_settings", user_id=ANN, desired_retention=0.9, new_per_day=20, reviews_per_day=200,
          learning_steps=[1, 10], relearning_steps=[10], time_zone="Europe/Paris", updated_at=t,
          keyboard_shortcuts=True)  # fmt: skip
    schedule = {"state": 2, "stability": 3.0, "difficulty": 5.0, "due": w.at(9), "last_review": w.at(7),
                "suspended": False, "updated_at": w.at(7)}  # fmt: skip
    for sid, uid, card in ((1, ANN, "d1-1"), (2, BEN, "d1-2")):
        w.row("flashcard_states", id=sid, user_id=uid, card_id=card, deck_id="d1", version=1, **schedule)
    for rid, uid, card, version in ((1, ANN, "d1-1", 0), (2, ANN, "d1-1", 1), (3, BEN, "d1-2", 0)):
        w.row("flashcard_reviews", id=rid, user_id=uid, card_id=card, deck_id="d1", review_key=f"k{rid}",
              raw_rating=4, rating=3, reviewed_at=w.at(7), duration_ms=1200, state_before=0,
              version_before=version, before={}, after={"state": 2})  # fmt: skip
    w.row("personal_cards", id=1, user_id=ANN, question_id="q1-2", front_html="f", back_html="b", created_at=t,
          version=1, **schedule)  # fmt: skip
    w.row("personal_card_reviews", user_id=ANN, card_id=1, raw_rating=3, rating=2, reviewed_at=w.at(8),
          state_before=0, version_before=0, before={}, after={})  # fmt: skip

    # Exercises: answers, progress (one given up), notes, a re-score.
    for pid, uid, answer, right in ((1, ANN, "3", False), (2, ANN, "4", True), (3, BEN, "4", True)):
        w.row("exercise_part_answers", id=pid, user_id=uid, exercise_id="s1-e1", part_id="p", answer=answer,
              correct=right, answered_at=w.at(10))  # fmt: skip
    w.row("exercise_part_progress", user_id=ANN, exercise_id="s1-e1", part_id="p", attempts=2, last_answer="4",
          solved_at=w.at(10), updated_at=w.at(10))  # fmt: skip
    w.row("exercise_part_progress", user_id=BEN, exercise_id="s1-e1", part_id="p", attempts=1, last_answer="4",
          given_up_at=w.at(10), updated_at=w.at(10))  # fmt: skip
    w.row("exercise_notes", user_id=ANN, exercise_id="s1-e1", notes="ring!", done_at=w.at(10), updated_at=w.at(10))
    w.row("exercise_part_rescores", user_id=BEN, exercise_id="s1-e1", part_id="p", was_solved=False,
          now_solved=True, answers_changed=1, note_html="", rescored_at=w.at(11))  # fmt: skip

    w.row("problem_reports", user_id=ANN, item_kind="question", item_id="q1-2", attempt_id=1, content_digest="e" * 64,
          text="B is right", state="answered", created_at=w.at(3), answer="Yes", answered_by=PROF,
          answered_at=w.at(4))  # fmt: skip


def tables(conn: Connection) -> list[str]:
    return sorted(t for t in inspect(conn).get_table_names() if t != "alembic_version")


def columns_of(conn: Connection, names: list[str]) -> dict[str, list[str]]:
    return {t: sorted(c["name"] for c in inspect(conn).get_columns(t)) for t in names}


def snapshot(conn: Connection, layout: dict[str, list[str]], skip: frozenset[str] = frozenset()) -> dict[str, Any]:
    """Every row of the tables in ``layout``, as the values of those columns (``skip``: ``table.column``s left out)."""
    found = {}
    for table, cols in layout.items():
        kept = [c for c in cols if f"{table}.{c}" not in skip]
        quoted = ", ".join(f'"{c}"' for c in kept)
        rows = conn.execute(text(f"SELECT {quoted} FROM {table}")).all()
        found[table] = sorted((tuple(str(v) for v in r) for r in rows), key=repr)
    return found


def counts(conn: Connection, names: list[str]) -> dict[str, int]:
    return {t: conn.execute(text(f"SELECT COUNT(*) FROM {t}")).scalar_one() for t in names}


def heads(conn: Connection) -> set[str]:
    return {r[0] for r in conn.execute(text("SELECT version_num FROM alembic_version"))}


@pytest.fixture(params=BACKENDS)
def previous(request: pytest.FixtureRequest) -> Iterator[str]:
    """The URL of a database at the previous release's schema, holding that release's rows."""
    url = make_db_url(request.param, request, "ringlab_upgrade")
    config = alembic_config(url)
    for head in PREVIOUS:
        command.upgrade(config, head)
    engine = make_engine(url)
    with engine.begin() as conn:
        assert heads(conn) == set(PREVIOUS)
        write_previous_release(conn)
    engine.dispose()
    yield url


def test_an_upgrade_from_the_previous_release_keeps_every_row_in_the_default_course(previous: str) -> None:
    engine = make_engine(previous)
    with engine.connect() as conn:
        old_tables = tables(conn)
        layout = columns_of(conn, old_tables)
        before_counts = counts(conn, old_tables)
        before = snapshot(conn, layout)
        owners = {t: conn.execute(text(f"SELECT id, user_id FROM {t} ORDER BY id")).all() for t in WORK}
    assert all(before_counts[t] for t in ("quiz_answers", "quiz_attempts", "flashcard_reviews", "lab_submissions"))
    engine.dispose()

    command.upgrade(alembic_config(previous), "heads")
    engine = make_engine(previous)
    with engine.connect() as conn:
        assert not heads(conn) & set(PREVIOUS)
        assert counts(conn, old_tables) == before_counts  # nothing lost, nothing cascaded away
        # Every value of every column that was there is unchanged, but the instructor's site role.
        assert snapshot(conn, layout, frozenset({"users.role"})) == snapshot_without(before, layout, "users.role")
        roles = dict(conn.execute(text("SELECT id, role FROM users")).all())
        assert roles == {ANN: "student", BEN: "student", PROF: "admin"}
        for table in WORK:
            assert conn.execute(text(f"SELECT id, user_id FROM {table} ORDER BY id")).all() == owners[table], table
            courses = {r[0] for r in conn.execute(text(f"SELECT DISTINCT course_id FROM {table}"))}
            assert courses == {"default"}, table
        enrolled = conn.execute(text("SELECT user_id, course_id, role FROM enrollments ORDER BY user_id")).all()
        assert [tuple(r) for r in enrolled] == [
            (ANN, "default", "student"), (BEN, "default", "student"), (PROF, "default", "instructor"),
        ]  # fmt: skip
        assert conn.execute(text("SELECT id FROM courses")).scalars().all() == ["default"]
    # The app's own models read the upgraded rows.
    with Session(engine) as session:
        attempts = session.scalars(select(QuizAttempt).order_by(QuizAttempt.id)).all()
        assert [(a.id, a.user_id, a.course_id, len(a.answers)) for a in attempts] == [
            (1, ANN, "default", 2), (2, BEN, "default", 2), (3, ANN, "default", 2),
        ]  # fmt: skip
    engine.dispose()

    # One step back: the previous release's schema, with exactly its rows again.
    command.downgrade(alembic_config(previous), "0010_problem_reports")
    engine = make_engine(previous)
    with engine.connect() as conn:
        assert heads(conn) == set(PREVIOUS)
        assert tables(conn) == old_tables and columns_of(conn, old_tables) == layout
        assert counts(conn, old_tables) == before_counts
        assert snapshot(conn, layout) == before
    engine.dispose()


def snapshot_without(found: dict[str, Any], layout: dict[str, list[str]], skipped: str) -> dict[str, Any]:
    """``found`` with the column ``skipped`` (``table.column``) taken out of its table's rows."""
    table, column = skipped.split(".")
    at = layout[table].index(column)
    rows = sorted((r[:at] + r[at + 1 :] for r in found[table]), key=repr)
    return {**found, table: rows}
