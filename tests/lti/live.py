"""Ringlab live for LTI: ``create_app`` served by uvicorn in a thread on a free port, on a migrated database
with the repository's content, reached as ``http://localhost:<port>`` (another site than the platform's
127.0.0.1). Used by the tests' ``tool`` fixture and by ``bench/lti.py``."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.db import make_engine, make_sessionmaker, session_scope, utcnow
from app.lti import registry
from app.main import create_app

CONTENT_DIR = Path(__file__).resolve().parents[2] / "content"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Tool:
    """Ringlab, live: its base URL, and the database it uses."""

    base: str
    engine: Engine
    factory: sessionmaker[Session]
    app: FastAPI

    def count(self, model: Any) -> int:
        with session_scope(self.factory) as session:
            return int(session.scalar(select(func.count()).select_from(model)) or 0)

    def register(self, lms: Any) -> None:
        """Register a platform (``tests.lti.platform.Platform``) as `ringlab lti add-platform` would."""
        with session_scope(self.factory) as session:
            registry.register(
                registry.Registration(
                    lms.issuer, lms.client_id, lms.auth_login_url, lms.token_url, lms.jwks_url, [lms.deployment_id],
                    name="Test LMS",
                ),
                session=session, now=utcnow(),
            )  # fmt: skip

    def stop_sender(self) -> None:
        """Stop the web process's own sender (a benchmark sends by hand)."""
        task = getattr(self.app.state, "lti_sender", None)
        if task is not None:
            task.get_loop().call_soon_threadsafe(task.cancel)
            time.sleep(0.2)


@contextmanager
def serve(url: str, data: Path, *, send_every: float = 0.2) -> Iterator[Tool]:
    settings = Settings(
        database_url=url, data_dir=data, content_dir=CONTENT_DIR, sync_content_on_start=False,
        lti_send_every=send_every,
    )  # fmt: skip
    app = create_app(settings)
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("Ringlab did not start")
        time.sleep(0.05)
    engine = make_engine(url)
    try:
        yield Tool(f"http://localhost:{port}", engine, make_sessionmaker(engine), app)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        engine.dispose()


@contextmanager
def serve_tool(backend: str, *, send_every: float = 5.0) -> Iterator[Tool]:
    """A fresh, migrated, synced database on ``backend`` (PostgreSQL: a throwaway cluster), served."""
    import shutil
    import tempfile

    from app.content.service import sync_directory
    from app.migrate import upgrade

    base = Path(tempfile.mkdtemp(prefix=f"ringlab-lti-{backend}-"))
    base.chmod(0o755)
    cluster = None
    try:
        if backend == "sqlite":
            url = f"sqlite:///{base / 'lti.sqlite3'}"
        else:
            from tests.pg import PostgresCluster

            cluster = PostgresCluster(base / "pg")
            cluster.start()
            url = cluster.create_database("ringlab_lti")
        upgrade(url)
        engine = make_engine(url)
        sync_directory(CONTENT_DIR, make_sessionmaker(engine))
        engine.dispose()
        with serve(url, base, send_every=send_every) as tool:
            yield tool
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
