"""`ringlab courses` and `ringlab users create`'s course options, run as an operator would (from the command's
entry point, in this process: ``tests.cli``) on a fresh SQLite database, checked in the database afterwards."""

from __future__ import annotations

import os
import re
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from sqlalchemy import Engine, select
from sqlalchemy.orm import Session

from app.accounts.models import PasswordReset, Role, User
from app.cli.courses import RoleChoice
from app.content.records import Course
from app.courses.models import AuditEntry, CourseRole, Enrollment
from app.db import make_engine
from tests.cli import ringlab


def environment(path: Path) -> dict[str, str]:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{path}"}
    env["RINGLAB_PASSWORD"] = "a-long-password"
    env.pop("RINGLAB_JOIN_CODE", None)
    return env


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An empty database made by `ringlab db upgrade`, once: each test starts from a copy of it."""
    path = tmp_path_factory.mktemp("courses-cli") / "migrated.sqlite3"
    done = ringlab("db", "upgrade", env=environment(path))
    assert done.returncode == 0, done.stderr
    return path


@pytest.fixture
def env(migrated: Path, tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "courses.sqlite3"
    # SQLite's own backup: the whole database, whatever its write-ahead log still held.
    with closing(sqlite3.connect(migrated)) as source, closing(sqlite3.connect(path)) as copy:
        source.backup(copy)
    return environment(path)


@pytest.fixture
def db(env: dict[str, str]) -> Iterator[Engine]:
    """The database the commands use, with a second course, "b", beside the default one."""
    engine = make_engine(env["DATABASE_URL"])
    with Session(engine) as session:
        session.add(
            Course(id="b", title="Section B", term="Spring 2027", time_zone="UTC", assignments=None, position=1)
        )
        session.commit()
    yield engine
    engine.dispose()


def roles(db: Engine, course_id: str) -> dict[str, CourseRole]:
    with Session(db) as session:
        rows = session.execute(
            select(User.username, Enrollment.role)
            .join(Enrollment, Enrollment.user_id == User.id)
            .where(Enrollment.course_id == course_id)
        ).all()
    return dict(rows)  # type: ignore[arg-type]


def actions(db: Engine) -> list[tuple[str, str]]:
    with Session(db) as session:
        return [(a.actor, a.action) for a in session.scalars(select(AuditEntry).order_by(AuditEntry.id))]


def test_the_role_choices_are_the_course_roles() -> None:
    assert [r.value for r in RoleChoice] == [r.value for r in CourseRole]


def test_users_create_enrols_in_a_course_or_makes_an_administrator(env: dict[str, str], db: Engine) -> None:
    ada = ringlab("users", "create", "ada", env=env)
    assert ada.returncode == 0 and "created student 'ada' in course 'default'" in ada.stdout
    tara = ringlab("users", "create", "tara", "--course", "b", "--role", "TA", env=env)
    assert tara.returncode == 0 and "created ta 'tara' in course 'b'" in tara.stdout, tara.stderr
    root = ringlab("users", "create", "root", "--admin", env=env)
    assert root.returncode == 0 and "created admin 'root' (a site administrator: every course)" in root.stdout
    # The old flag still works: an instructor of --course, said to be deprecated.
    prof = ringlab("users", "create", "prof", "--instructor", env=env)
    assert prof.returncode == 0 and "created instructor 'prof' in course 'default'" in prof.stdout
    assert "warning: --instructor is deprecated: use --role instructor" in prof.stderr
    assert roles(db, "default") == {"ada": CourseRole.student, "prof": CourseRole.instructor}
    assert roles(db, "b") == {"tara": CourseRole.ta}
    with Session(db) as session:
        assert session.scalar(select(User.role).where(User.username == "root")) == Role.admin
        assert session.scalar(select(User.role).where(User.username == "prof")) == Role.student
    assert actions(db) == [("terminal", "course.member.add")] * 3


def test_users_create_refuses_contradictions_and_unknown_courses_creating_nothing(
    env: dict[str, str], db: Engine
) -> None:
    both = ringlab("users", "create", "root", "--admin", "--role", "ta", env=env)
    assert both.returncode == 1 and "error: a site administrator is in every course already" in both.stderr
    clash = ringlab("users", "create", "prof", "--instructor", "--role", "student", env=env)
    assert clash.returncode == 1 and "error: --instructor and --role student disagree" in clash.stderr
    nowhere = ringlab("users", "create", "ada", "--course", "nope", env=env)
    assert nowhere.returncode == 1 and "error: There is no course 'nope'." in nowhere.stderr
    bad = ringlab("users", "create", "ada", "--role", "dean", env=env)
    assert bad.returncode == 2 and "dean" in bad.stderr
    with Session(db) as session:
        assert session.scalars(select(User.username)).all() == []


def test_enroll_show_list_and_remove(env: dict[str, str], db: Engine) -> None:
    for name in ("ada", "bea", "bob"):
        assert ringlab("users", "create", name, "--course", "b", env=env).returncode == 0
    made = ringlab("courses", "enroll", "BEA", "b", "--role", "instructor", env=env)
    assert made.returncode == 0 and "bea is an instructor of 'b'" in made.stdout, made.stderr
    assert ringlab("courses", "enroll", "ada", "default", env=env).stdout == "ada is a student of 'default'\n"
    listed = ringlab("courses", "list", env=env)
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        "default\tDefault course\t1 student, 0 TAs, 0 instructors\topen (anyone who signs up)",
        "b\tSection B (Spring 2027)\t2 students, 0 TAs, 1 instructor\tclosed",
    ]
    shown = ringlab("courses", "show", "b", env=env)
    assert shown.returncode == 0
    assert shown.stdout.splitlines() == [
        "b: Section B (Spring 2027)", "joining: closed", "bea\t\tinstructor", "ada\t\tstudent", "bob\t\tstudent",
    ]  # fmt: skip
    gone = ringlab("courses", "remove", "ada", "b", env=env)
    assert gone.returncode == 0 and "removed ada from 'b'" in gone.stdout
    assert roles(db, "b") == {"bea": CourseRole.instructor, "bob": CourseRole.student}
    assert actions(db)[-3:] == [
        ("terminal", "course.member.role"), ("terminal", "course.member.add"), ("terminal", "course.member.remove"),
    ]  # fmt: skip


def test_course_command_errors_say_what_is_wrong(env: dict[str, str], db: Engine) -> None:
    assert ringlab("users", "create", "bea", "--course", "b", "--role", "instructor", env=env).returncode == 0
    cases = [
        (("courses", "show", "nope"), "error: There is no course 'nope'."),
        (("courses", "enroll", "zed", "b"), "error: There is no account 'zed'."),
        (("courses", "enroll", "bea", "nope"), "error: There is no course 'nope'."),
        (("courses", "remove", "bea", "default"), "error: bea is not in this course."),
        (("courses", "remove", "bea", "b"), "error: bea is this course's only instructor"),
        (("courses", "enroll", "bea", "b", "--role", "student"), "error: bea is this course's only instructor"),
        (("courses", "join-code", "b", "--new", "--off"), "error: give --new or --off, not both"),
    ]
    for args, message in cases:
        done = ringlab(*args, env=env)
        assert done.returncode == 1 and message in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    assert roles(db, "b") == {"bea": CourseRole.instructor}


def test_join_codes_show_new_and_off(env: dict[str, str], db: Engine) -> None:
    assert ringlab("courses", "join-code", "b", env=env).stdout == "b: closed\n"
    made = ringlab("courses", "join-code", "b", "--new", env=env)
    code = made.stdout.strip()
    assert made.returncode == 0 and re.fullmatch(r"[A-HJ-NP-Z2-9]{8}", code)
    assert "the new join code of 'b'; the old one no longer works" in made.stderr
    assert ringlab("courses", "join-code", "b", env=env).stdout == f"b: join code {code}\n"
    assert f"join code {code}" in ringlab("courses", "list", env=env).stdout
    off = ringlab("courses", "join-code", "b", "--off", env=env)
    assert off.returncode == 0 and off.stdout == "b: closed\n"
    operator = ringlab("courses", "join-code", "default", env={**env, "RINGLAB_JOIN_CODE": "letmein"})
    assert operator.stdout == "default: RINGLAB_JOIN_CODE\n"
    assert actions(db) == [("terminal", "course.join_code.new"), ("terminal", "course.join_code.off")]


def test_import_enrols_makes_accounts_and_prints_their_links(env: dict[str, str], db: Engine, tmp_path: Path) -> None:
    assert ringlab("users", "create", "ada", env=env).returncode == 0
    roster = tmp_path / "roster.csv"
    roster.write_text("username,name,email\nada,,\nnewbie,New Student,newbie@example.edu\n", encoding="utf-8")
    done = ringlab("courses", "import", "b", str(roster), "--base-url", "https://ringlab.example.edu/", env=env)
    assert done.returncode == 0, done.stderr
    link = re.fullmatch(r"newbie\thttps://ringlab\.example\.edu/reset/([\w-]+)\n", done.stdout)
    assert link is not None
    assert "'b': 1 new account, 1 existing enrolled, 0 already in it" in done.stderr
    assert roles(db, "b") == {"ada": CourseRole.student, "newbie": CourseRole.student}
    with Session(db) as session:
        newbie = session.scalar(select(User).where(User.username == "newbie"))
        assert newbie is not None and (newbie.full_name, newbie.email) == ("New Student", "newbie@example.edu")
        reset = session.scalar(select(PasswordReset).where(PasswordReset.user_id == newbie.id))
        assert reset is not None and reset.created_by_id is None and reset.used_at is None
    again = ringlab("courses", "import", "b", str(roster), env=env)
    assert again.returncode == 0 and again.stdout == ""
    assert "0 new accounts, 0 existing enrolled, 2 already in it" in again.stderr


def test_import_of_a_bad_roster_names_each_line_and_changes_nothing(
    env: dict[str, str], db: Engine, tmp_path: Path
) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("username,name\nfine,Fine\nno good,X\nfine,Again\n", encoding="utf-8")
    done = ringlab("courses", "import", "b", str(roster), env=env)
    assert done.returncode == 1
    assert f"error: {roster}: Line 3: 'no good' is not a valid username" in done.stderr
    assert f"error: {roster}: Line 4: 'fine' is already on line 2." in done.stderr
    assert "error: nothing was imported" in done.stderr
    missing = ringlab("courses", "import", "b", str(tmp_path / "nope.csv"), env=env)
    assert missing.returncode == 1 and "error: cannot read" in missing.stderr
    good = tmp_path / "good.csv"
    good.write_text("username\nfine\n", encoding="utf-8")
    nowhere = ringlab("courses", "import", "nope", str(good), env=env)
    assert nowhere.returncode == 1 and "error: There is no course 'nope'." in nowhere.stderr
    with Session(db) as session:
        assert session.scalars(select(User.username)).all() == []
    assert actions(db) == []
