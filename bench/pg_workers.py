"""Grading workers on PostgreSQL: how much an idle worker costs the database, how fast a job is claimed.

Starts a throwaway PostgreSQL server (the test suite's, Debian's `postgresql`) unless
``--database-url`` names one, migrates a fresh database, starts ``--workers`` real
``ringlab worker`` processes against it, and measures:

- idle load: transactions per second the database commits while the workers wait for work;
- claim latency: from a job's commit (``queued_at``) to a worker's claim (``started_at``), over
  ``-n`` correct collectives-p2p submissions spaced ``--every`` seconds apart (so each finds an
  idle worker: this measures the wake-up, not the queue).

    .venv/bin/python bench/pg_workers.py [--workers 2] [-n 15] [--every 3] [--database-url URL]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from sqlalchemy import Engine, select, text  # noqa: E402

from app.content.service import sync_directory  # noqa: E402
from app.db import make_engine, make_sessionmaker, session_scope, utcnow  # noqa: E402
from app.labs import catalog, service  # noqa: E402
from app.labs.models import Submission  # noqa: E402
from app.labs.settings import LabSettings  # noqa: E402
from app.migrate import upgrade  # noqa: E402
from app.web.auth import Principal  # noqa: E402
from bench.grading import percentile  # noqa: E402

CONTENT = REPO / "content"
LAB = "collectives-p2p"


@contextmanager
def database(url: str | None, name: str = "ringlab_bench_workers") -> Iterator[str]:
    """``url`` as given, or a new database ``name`` on a throwaway PostgreSQL server, stopped afterwards."""
    if url:
        yield url
        return
    from tests.pg import PostgresCluster

    base = Path(tempfile.mkdtemp(prefix="ringlab-bench-pg-"))
    base.chmod(0o755)
    cluster = PostgresCluster(base)
    cluster.start()
    try:
        yield cluster.create_database(name)
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


def commits(engine: Engine) -> int:
    with engine.connect() as conn:
        return int(
            conn.execute(
                text("SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()")
            ).scalar_one()
        )


def idle_load(engine: Engine, seconds: float) -> float:
    """Transactions per second, less the one that reads the counter."""
    before = commits(engine)
    time.sleep(seconds)
    return (commits(engine) - before - 1) / seconds


def submit_spaced(engine: Engine, n: int, every: float) -> list[int]:
    from tests.factories import make_user

    factory = make_sessionmaker(engine)
    with factory() as session:
        lab = catalog.get_lab(session, LAB)
    limits = service.Limits.of(LabSettings())
    code = (CONTENT / "labs" / LAB / "solution.py").read_text()
    ids = []
    for i in range(n):
        with session_scope(factory) as session:
            user = make_user(session, f"bench-worker-{i}-{os.getpid()}")
            ids.append(service.submit(lab, Principal.of(user), code, session=session, now=utcnow(), limits=limits).id)
        time.sleep(every)
    return ids


def claim_latencies_ms(engine: Engine, ids: list[int], timeout: float = 120) -> list[float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with make_sessionmaker(engine)() as session:
            rows = session.scalars(select(Submission).where(Submission.id.in_(ids))).all()
            if all(r.done for r in rows):
                return sorted((r.started_at - r.queued_at).total_seconds() * 1000 for r in rows if r.started_at)
        time.sleep(0.5)
    raise SystemExit("the workers did not grade every job in time")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("-n", type=int, default=15, help="submissions")
    parser.add_argument("--every", type=float, default=3.0, help="seconds between submissions")
    parser.add_argument("--idle", type=float, default=10.0, help="seconds of idle load to measure")
    parser.add_argument("--database-url", help="an empty PostgreSQL database (default: a throwaway server)")
    args = parser.parse_args()

    with database(args.database_url) as url:
        upgrade(url)
        engine = make_engine(url)
        sync_directory(CONTENT, make_sessionmaker(engine))
        env = {**os.environ, "DATABASE_URL": url, "RINGLAB_CONTENT_DIR": str(CONTENT)}
        command = [sys.executable, "-m", "app", "worker", "--pool", "1"]
        workers = [subprocess.Popen(command, cwd=REPO, env=env, stderr=subprocess.DEVNULL) for _ in range(args.workers)]
        try:
            time.sleep(10)  # started, warm sandboxes ready, idle
            load = idle_load(engine, args.idle)
            latencies = claim_latencies_ms(engine, submit_spaced(engine, args.n, args.every))
        finally:
            for proc in workers:
                proc.terminate()
                proc.wait(timeout=60)
            engine.dispose()
    print(f"{args.workers} idle workers: {load:.1f} transactions/s on the database")
    print(
        f"queued -> claimed, n={len(latencies)}: median {statistics.median(latencies):.1f} ms, "
        f"p90 {percentile(latencies, 0.9):.1f} ms, max {latencies[-1]:.1f} ms"
    )


if __name__ == "__main__":
    main()
