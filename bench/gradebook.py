"""The instructor gradebook for a class of 200 students with full histories, on SQLite and PostgreSQL.

Seeds a fresh, migrated database per backend with the test factories (``tests/factories.py``):
``--students`` students, each with 3 Module 202 and 2 Chapter 35 attempts (submitted, some after
the quiz's due date), 5 ring all-reduce and 3 collectives submissions, and ``--reviews`` flashcard
reviews over 40 cards; then signs an instructor in and times ``GET /instructor/gradebook``
through the whole app in-process (middleware, session, queries, template), ``-n`` times after
two warm-up requests, sorted by name (the default page), by a quiz column, and the CSV export.
PostgreSQL is the test suite's throwaway cluster (Debian's ``postgresql``).

    .venv/bin/python bench/gradebook.py [--students 200] [--reviews 200] [-n 30] [--backends sqlite,postgresql]
        [--other-students 200]

The class is the default course; ``--other-students`` students of a second course on the same server
make the same work there (the gradebook must show none of it), and one student in ten has an
extension on each quiz (their own due date and an extra attempt).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from fastapi.testclient import TestClient  # noqa: E402
from sqlalchemy import select  # noqa: E402

from app.accounts.models import Role  # noqa: E402
from app.config import Settings  # noqa: E402
from app.content.records import Card, Course, Quiz  # noqa: E402
from app.content.service import sync_directory  # noqa: E402
from app.courses.models import Extension  # noqa: E402
from app.db import make_engine, make_sessionmaker, utcnow  # noqa: E402
from app.labs.models import SubmissionStatus  # noqa: E402
from app.main import create_app  # noqa: E402
from app.migrate import upgrade  # noqa: E402
from bench.grading import percentile  # noqa: E402
from tests.factories import make_attempt, make_reviews, make_submission, make_user, sign_in  # noqa: E402

CONTENT = REPO / "content"


@contextmanager
def database(backend: str) -> Iterator[str]:
    base = Path(tempfile.mkdtemp(prefix=f"ringlab-bench-gradebook-{backend}-"))
    base.chmod(0o755)
    try:
        if backend == "sqlite":
            yield f"sqlite:///{base / 'gradebook.sqlite3'}"
            return
        from tests.pg import PostgresCluster

        cluster = PostgresCluster(base)
        cluster.start()
        try:
            yield cluster.create_database("ringlab_bench_gradebook")
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def seed(url: str, students: int, reviews: int, others: int = 0) -> float:
    """Seed the class (the default course), and ``others`` students of another course on the same server,
    with the same work made there; returns the seconds it took."""
    started = time.perf_counter()
    engine = make_engine(url)
    factory = make_sessionmaker(engine)
    now = utcnow()
    with factory() as session:
        quiz = session.get(Quiz, "module-202")
        assert quiz is not None
        quiz.due_at = now - timedelta(days=3)
        session.commit()
        cards = list(session.scalars(select(Card.id).where(Card.deck_id == "mire-dis-train").order_by(Card.id)))[:40]
        make_user(session, "prof", role=Role.admin)
        session.add(Course(id="other", title="Another section", time_zone="UTC", assignments=None, position=1))
        session.commit()
        people = [(f"student{i:03d}", "default") for i in range(students)]
        people += [(f"other{i:03d}", "other") for i in range(others)]
        for i, (name, course) in enumerate(people):
            user = make_user(session, name, course=course)
            t0 = now - timedelta(days=10, minutes=i)
            if course == "default" and i % 10 == 0:  # one student in ten has an extension on each quiz
                for quiz_id in ("module-202", "ch35-quiz"):
                    grant = Extension(course_id=course, user_id=user.id, assessment=f"quiz:{quiz_id}",
                                      due_at=now + timedelta(days=2), extra_attempts=1, reason="bench")  # fmt: skip
                    session.add(grant)
            for k in range(3):
                at = t0 + timedelta(days=3 * k)
                make_attempt(session, user.id, "module-202", right=(i + 7 * k) % 26, started_at=at,
                             submitted_at=at + timedelta(minutes=40), commit=False, course=course)  # fmt: skip
            for k in range(2):
                at = t0 + timedelta(days=k, hours=2)
                make_attempt(session, user.id, "ch35-quiz", right=(i + k) % 16, started_at=at,
                             submitted_at=at + timedelta(minutes=15), commit=False, course=course)  # fmt: skip
            for k in range(5):
                make_submission(session, user.id, "ring-allreduce", score=(i + 3 * k) % 11,
                                submitted_at=t0 + timedelta(hours=k), commit=False, course=course)  # fmt: skip
            for k in range(3):
                status = SubmissionStatus.failed if k == 0 else SubmissionStatus.graded
                make_submission(session, user.id, "collectives-p2p", score=None if k == 0 else 5 + k, status=status,
                                submitted_at=t0 + timedelta(hours=10 + k), commit=False, course=course)  # fmt: skip
            ratings = [1 + (i + n) % 4 for n in range(reviews)]
            make_reviews(session, user.id, "mire-dis-train", cards, ratings=ratings, start=t0,
                         due=now + timedelta(days=(i % 5) - 2), commit=False)  # fmt: skip
            session.commit()
    engine.dispose()
    return time.perf_counter() - started


def time_get(client: TestClient, url: str, n: int) -> list[float]:
    for _ in range(2):
        assert client.get(url).status_code == 200
    times = []
    for _ in range(n):
        start = time.perf_counter()
        response = client.get(url)
        times.append((time.perf_counter() - start) * 1000)
        assert response.status_code == 200, response.text[:300]
    return sorted(times)


def run(backend: str, students: int, reviews: int, n: int, others: int = 0) -> None:
    with database(backend) as url:
        upgrade(url)
        engine = make_engine(url)
        sync_directory(CONTENT, make_sessionmaker(engine))
        engine.dispose()
        seconds = seed(url, students, reviews, others)
        settings = Settings(database_url=url, data_dir=Path(tempfile.mkdtemp(prefix="ringlab-bench-data-")),
                            content_dir=CONTENT, sync_content_on_start=False)  # fmt: skip
        app = create_app(settings)
        with TestClient(app) as client:
            sign_in(client, "prof")
            page = client.get("/instructor/gradebook").text
            assert 'data-student="student000"' in page, "the gradebook does not show the seeded class"
            assert 'data-student="other000"' not in page, "the gradebook shows another course's student"
            print(
                f"{backend}: {students} students seeded in {seconds:.1f} s ({reviews} reviews each), "
                f"beside {others} students of another course"
            )
            for label, url_ in (
                ("gradebook, by name, first 50 rows", "/instructor/gradebook"),
                ("gradebook, sorted by a quiz", "/instructor/gradebook?sort=quiz:module-202&desc=true"),
                ("gradebook, name filter", "/instructor/gradebook?q=student1"),
                ("gradebook.csv, whole class", "/instructor/gradebook.csv"),
            ):
                times = time_get(client, url_, n)
                print(f"  {label:36s} median {statistics.median(times):7.1f} ms   p90 {percentile(times, 0.9):7.1f} ms")
        app.state.engine.dispose()
        shutil.rmtree(settings.data_dir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--students", type=int, default=200)
    parser.add_argument("--reviews", type=int, default=200)
    parser.add_argument("-n", type=int, default=30)
    parser.add_argument("--other-students", type=int, default=200, help="students of a second course on the server")
    parser.add_argument("--backends", default="sqlite,postgresql")
    args = parser.parse_args()
    print(f"pid {os.getpid()}, {os.cpu_count()} CPUs")
    for backend in args.backends.split(","):
        run(backend.strip(), args.students, args.reviews, args.n, args.other_students)


if __name__ == "__main__":
    main()
