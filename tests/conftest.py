"""Shared fixtures.

Database tests run once per backend: SQLite, and a real PostgreSQL server this
suite starts as a throwaway cluster (RINGLAB_TEST_BACKENDS=sqlite narrows it).
Each backend is migrated with Alembic and loaded with the repository's content
once; every test then runs inside a transaction that is rolled back.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import Connection, Engine
from sqlalchemy.orm import Session, sessionmaker

from app.config import Settings
from app.content.loader import load_tree
from app.content.models import ContentTree
from app.content.service import sync_directory
from app.db import READ_ONLY, make_engine, make_sessionmaker
from app.labs import catalog
from app.main import create_app
from app.migrate import upgrade
from tests.pg import PostgresCluster

REPO = Path(__file__).resolve().parents[1]
CONTENT_DIR = REPO / "content"
# How many labs the repository holds: the path through them and the pages that count them say so.
LAB_COUNT = sum(1 for p in (CONTENT_DIR / "labs").iterdir() if (p / "lab.yaml").is_file())
BACKENDS = [b.strip() for b in os.environ.get("RINGLAB_TEST_BACKENDS", "sqlite,postgresql").split(",") if b.strip()]


@pytest.fixture(scope="session")
def seeds_dir() -> Path:
    """The source documents every content item was imported from.

    They are not part of the repository: CI has them in ``../shared/seeds``, anyone else points
    ``RINGLAB_SEEDS_DIR`` at them. Where they are not, the tests that compare content with them
    skip, saying so; a ``RINGLAB_SEEDS_DIR`` that names a missing folder is a mistake and fails.
    """
    return find_seeds_dir(os.environ.get("RINGLAB_SEEDS_DIR"))


def find_seeds_dir(configured: str | None) -> Path:
    if configured:
        path = Path(configured)
        assert path.is_dir(), f"seed documents not found at {path} (RINGLAB_SEEDS_DIR names no folder)"
        return path
    path = REPO.parent / "shared" / "seeds"
    if not path.is_dir():
        pytest.skip(f"seed documents not found at {path} (set RINGLAB_SEEDS_DIR)")
    return path


@pytest.fixture(scope="session")
def content_tree() -> ContentTree:
    """The repository's content/ tree, loaded and validated."""
    return load_tree(CONTENT_DIR)


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresCluster]:
    # Not under pytest's tmp dir: that is private to this user, and as root the
    # server runs as the `postgres` user, which must be able to reach its files.
    base = Path(tempfile.mkdtemp(prefix="ringlab-pg-"))
    base.chmod(0o755)
    cluster = PostgresCluster(base)
    cluster.start()
    yield cluster
    cluster.stop()
    shutil.rmtree(base, ignore_errors=True)


def backend_of(url: str) -> str:
    return "sqlite" if url.startswith("sqlite") else "postgresql"


def make_db_url(backend: str, request: pytest.FixtureRequest, name: str) -> str:
    """A fresh, empty database on ``backend``."""
    if backend == "sqlite":
        return f"sqlite:///{request.getfixturevalue('tmp_path_factory').mktemp('db') / f'{name}.sqlite3'}"
    cluster: PostgresCluster = request.getfixturevalue("postgres")
    return cluster.create_database(name)


def migrated_db_url(backend: str, request: pytest.FixtureRequest, name: str) -> str:
    """A fresh database on ``backend``, migrated, with the repository's content synced into it."""
    url = make_db_url(backend, request, name)
    upgrade(url)
    engine = make_engine(url)
    sync_directory(CONTENT_DIR, make_sessionmaker(engine))
    engine.dispose()
    return url


# Per backend and test process: a database migrated and synced once, on first use, that no test opens; the
# databases of migrated_copy_url are copies of it.
_TEMPLATES: dict[str, str] = {}


def migrated_copy_url(backend: str, request: pytest.FixtureRequest, name: str) -> str:
    """A fresh database on ``backend`` holding what ``migrated_db_url`` makes, for a fraction of its cost.

    Migrating and syncing the content take seconds; a copy of a database that went through them once (per
    backend and test process) takes a fraction of one: SQLite's own backup of the file, or PostgreSQL's
    ``CREATE DATABASE ... TEMPLATE``. The copy is a database of its own: the template is never written to.
    """
    if backend not in _TEMPLATES:
        _TEMPLATES[backend] = migrated_db_url(backend, request, "ringlab_template")
    if backend == "postgresql":
        cluster: PostgresCluster = request.getfixturevalue("postgres")
        return cluster.create_database(name, template="ringlab_template")
    url = make_db_url(backend, request, name)
    with (
        closing(sqlite3.connect(_TEMPLATES[backend].removeprefix("sqlite:///"))) as template,
        closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as copy,
    ):
        template.backup(copy)
    return url


# One migrated, synced database per backend per test process, made on first use.
_SHARED: dict[str, str] = {}


@pytest.fixture(scope="session", params=BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str:
    """The database the rolled-back tests share.

    Made once per backend and test process and then kept: pytest-xdist runs a file's tests backend by
    backend, so this fixture is set up again at every switch (twice a file), and migrating and syncing
    the content each time cost a few seconds."""
    if request.param not in _SHARED:
        _SHARED[request.param] = migrated_copy_url(request.param, request, "ringlab_test")
    return _SHARED[request.param]


@pytest.fixture(scope="session")
def engine(db_url: str) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def connection(engine: Engine) -> Iterator[Connection]:
    with engine.connect() as conn:
        outer = conn.begin()
        yield conn
        outer.rollback()
    # A lab version stored in this rolled-back transaction may be numbered again by the next test.
    catalog.forget_versions()


@pytest.fixture
def session_factory(connection: Connection) -> sessionmaker[Session]:
    """Sessions whose commits are savepoints inside the test's rolled-back transaction."""
    return sessionmaker(bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False)


@pytest.fixture
def reader_factory(connection: Connection) -> sessionmaker[Session]:
    """Read-only sessions on the test's transaction, as GET requests get them."""
    return sessionmaker(
        bind=connection, join_transaction_mode="create_savepoint", expire_on_commit=False, info={READ_ONLY: True}
    )


@pytest.fixture
def session(session_factory: sessionmaker[Session]) -> Iterator[Session]:
    with session_factory() as s:
        yield s


@pytest.fixture
def settings(db_url: str, tmp_path: Path) -> Settings:
    # No LMS score sender: it would share the test's one connection from another thread (tests/lti runs it live).
    return Settings(
        database_url=db_url, data_dir=tmp_path, content_dir=CONTENT_DIR, sync_content_on_start=False, lti_send_every=0
    )


@pytest.fixture
def app(settings: Settings, session_factory: sessionmaker[Session], reader_factory: sessionmaker[Session]) -> FastAPI:
    application = create_app(settings)
    application.state.sessionmaker = session_factory
    application.state.readers = reader_factory
    return application


@pytest.fixture
def client(app: FastAPI) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c
