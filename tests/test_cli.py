"""The ringlab command, run as a user would.

`ringlab content check`, which answers before the command-line framework is loaded (``app.cli.main``), runs as a
real subprocess: its exit status and output cross the process boundary. The others run in this process from
the same entry point (``tests.cli``), each on its own fresh SQLite file.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.cli import ringlab
from tests.content.factories import QUIZ, write_tree

REPO = Path(__file__).resolve().parents[1]


def ringlab_process(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_content_check_passes_on_the_repository() -> None:
    done = ringlab_process("content", "check")
    assert done.returncode == 0, done.stderr
    labs = len(list((REPO / "content" / "labs").glob("*/lab.yaml")))  # grows as labs are authored
    assert f"2 quizzes (40 questions), 2 exercise sets (51 exercises), 1 decks (89 cards), {labs} labs" in done.stdout
    assert labs >= 6


def test_content_check_lists_problems_and_exits_non_zero(tmp_path: Path) -> None:
    bad = QUIZ.replace("answer: B", "answer: X").replace("title: Tiny quiz", "title: Tiny quiz\nmood: happy")
    root = write_tree(tmp_path / "content", **{"quizzes/tiny-quiz.yaml": bad})
    done = ringlab_process("content", "check", str(root))
    assert done.returncode == 1
    assert "quizzes/tiny-quiz.yaml:3: unknown field 'mood'" in done.stderr
    assert "Traceback" not in done.stderr


def test_content_export_json_shape() -> None:
    done = ringlab("content", "export", "--format", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert set(data) >= {"quizzes", "exercise_sets", "decks"}
    m202 = next(q for q in data["quizzes"] if q["id"] == "module-202")
    assert m202["passing_score"] == 0.8 and m202["time_limit_minutes"] == 60
    assert {"min", "max", "level", "recommendation"} <= set(m202["scoring_guide"][0])
    question = m202["questions"][0]
    assert {"id", "section", "prompt", "options", "answer", "explanation"} <= set(question)
    assert {"key", "text"} == set(question["options"][0])
    exercise = data["exercise_sets"][0]["exercises"][0]
    assert {"id", "number", "title", "difficulty", "body"} <= set(exercise)
    assert all(isinstance(e["difficulty"], int | None) for s in data["exercise_sets"] for e in s["exercises"])
    card = data["decks"][0]["cards"][0]
    assert {"id", "topic", "front", "back"} <= set(card)
    assert sum(len(d["cards"]) for d in data["decks"]) == 89


def test_db_upgrade_and_sync_on_a_fresh_sqlite_file(tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'fresh.sqlite3'}"}
    assert ringlab("db", "upgrade", env=env).returncode == 0
    first = ringlab("content", "sync", env=env)
    assert first.returncode == 0, first.stderr
    assert "added 2 quiz, 40 question, 2 exercise set, 51 exercise, 1 deck, 89 card" in first.stdout
    again = ringlab("content", "sync", env=env)
    assert "synced: added nothing; updated nothing; retired nothing" in again.stdout


def test_users_create_instructor_then_refuses_a_duplicate(tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'users.sqlite3'}"}
    assert ringlab("db", "upgrade", env=env).returncode == 0
    made = ringlab("users", "create", "prof", "--role", "instructor", "--password", "a-long-password", env=env)
    assert made.returncode == 0 and "prof" in made.stdout and "instructor" in made.stdout
    again = ringlab("users", "create", "PROF", "--password", "a-long-password", env=env)
    assert again.returncode == 1 and "is taken" in again.stderr
    short = ringlab("users", "create", "newbie", env={**env, "RINGLAB_PASSWORD": "short"})
    assert short.returncode == 1 and "at least 10 characters" in short.stderr


def test_users_accommodate_grants_shows_changes_and_removes_extra_time(tmp_path: Path) -> None:
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{tmp_path / 'acc.sqlite3'}", "RINGLAB_PASSWORD": "a-long-password"}
    assert ringlab("db", "upgrade", env=env).returncode == 0
    assert ringlab("users", "create", "ada", env=env).returncode == 0
    none = ringlab("users", "accommodate", "ada", env=env)
    assert none.returncode == 0 and "ada has no extra time" in none.stdout
    made = ringlab("users", "accommodate", "ADA", "--multiplier", "1.5", "--note", "letter of 3 March", env=env)
    assert made.returncode == 0, made.stderr
    assert "ada gets 1.5× the time limit on every timed quiz (a 60-minute quiz: 90 minutes)" in made.stdout
    # An option left out keeps its value: 1.5x stays, 10 minutes are added.
    more = ringlab("users", "accommodate", "ada", "--extra-minutes", "10", env=env)
    assert (
        "ada gets 1.5× the time limit + 10 extra minutes on every timed quiz (a 60-minute quiz: 100 minutes)"
        in more.stdout
    )
    bad = ringlab("users", "accommodate", "ada", "--multiplier", "15", env=env)
    assert bad.returncode == 1 and "error: The time multiplier must be between 1 and 4" in bad.stderr
    assert "Traceback" not in bad.stderr
    assert "a 60-minute quiz: 100 minutes" in ringlab("users", "accommodate", "ada", env=env).stdout
    gone = ringlab("users", "accommodate", "ada", "--remove", env=env)
    assert gone.returncode == 0 and "removed ada's extra time" in gone.stdout
    assert "ada has no extra time" in ringlab("users", "accommodate", "ada", env=env).stdout
    nobody = ringlab("users", "accommodate", "zed", "--multiplier", "2", env=env)
    assert nobody.returncode == 1 and "there is no account 'zed'" in nobody.stderr
