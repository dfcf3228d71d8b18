"""What the benchmark scripts share: a free local port and waiting for a server to come up."""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(url: str, proc: subprocess.Popen[bytes], log: Path, timeout: float = 120) -> None:
    """Return once ``url`` answers 200; exit with the server's log if it dies or never does."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"server at {url} did not start:\n{log.read_text()[-3000:]}")


def make_students(database: Path | str, n: int, prefix: str = "bench") -> list[str]:
    """``n`` students and an API token each, straight in the database (sign-in is not what we measure),
    each a student of the default course (work belongs to a course: its content must be synced first).

    ``database`` is a SQLite file, or a SQLAlchemy URL (a PostgreSQL database)."""
    from datetime import timedelta

    from app.accounts.models import User
    from app.accounts.service import hasher, issue_api_token
    from app.content.courses import DEFAULT_COURSE
    from app.courses.models import CourseRole
    from app.courses.service import enroll
    from app.db import make_engine, make_sessionmaker, session_scope, utcnow

    engine = make_engine(database if isinstance(database, str) else f"sqlite:///{database}")
    tokens = []
    password = hasher().hash("bench-password-1")
    with session_scope(make_sessionmaker(engine)) as session:
        for i in range(n):
            user = User(username=f"{prefix}{i}", username_key=f"{prefix}{i}", password_hash=password)
            session.add(user)
            session.flush()
            enroll(user.id, DEFAULT_COURSE, CourseRole.student, session=session)
            tokens.append(issue_api_token(user, session=session, now=utcnow(), ttl=timedelta(hours=2)).token)
    engine.dispose()
    return tokens


def tree_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) used so far by a process and its live descendants (Linux /proc)."""
    tick = os.sysconf("SC_CLK_TCK")
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / tick
            for task in Path(f"/proc/{current}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
    return total
