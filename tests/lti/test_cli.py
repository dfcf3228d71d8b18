"""`ringlab lti`: registering an LMS, what to paste into it, key rotation, connecting an LMS course."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session
from typer.testing import CliRunner

from app.cli.root import app
from app.config import get_settings
from app.db import make_engine
from app.lti.models import ContextLink, Deployment, Platform, ToolKey
from app.migrate import upgrade

LMS = [
    "--issuer", "https://canvas.instructure.com", "--client-id", "10000000000042",
    "--auth-login-url", "https://sso.canvaslms.com/api/lti/authorize_redirect",
    "--auth-token-url", "https://sso.canvaslms.com/login/oauth2/token",
    "--key-set-url", "https://sso.canvaslms.com/api/lti/security/jwks",
    "--deployment", "17:abc", "--frame-origin", "https://stateu.instructure.com",
]  # fmt: skip


@pytest.fixture
def url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    url = f"sqlite:///{tmp_path / 'lti.sqlite3'}"
    upgrade(url)
    monkeypatch.setenv("DATABASE_URL", url)
    get_settings.cache_clear()
    yield url
    get_settings.cache_clear()


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_add_platform_prints_what_to_paste_and_updates_in_place(url: str) -> None:
    code, out = run("lti", "add-platform", *LMS, "--name", "Canvas (State U)", "--tool-url", "https://rl.example.edu/")
    assert code == 0, out
    assert "registered Canvas (State U)" in out
    assert "OIDC login (initiation) URL: https://rl.example.edu/lti/login" in out
    assert "Public keyset (JWKS) URL: https://rl.example.edu/lti/jwks.json" in out
    code, out = run("lti", "add-platform", *LMS, "--deployment", "18:def")
    assert code == 0 and "updated Canvas (State U)" in out
    engine = make_engine(url)
    with Session(engine) as session:
        platform = session.scalars(select(Platform)).one()  # the same registration, not a second one
        assert platform.frame_origins == "https://stateu.instructure.com"
        assert sorted(session.scalars(select(Deployment.deployment_id))) == ["17:abc", "18:def"]
        assert session.scalar(select(ToolKey.kid)) is not None  # our signing key exists from the start
    code, out = run("lti", "list")
    assert code == 0 and "https://canvas.instructure.com" in out and "17:abc, 18:def" in out
    engine.dispose()


def test_a_bad_address_is_refused_and_nothing_is_written(url: str) -> None:
    bad = [*LMS]
    bad[bad.index("--key-set-url") + 1] = "sso.canvaslms.com/jwks"
    code, out = run("lti", "add-platform", *bad)
    assert code == 1 and "--key-set-url 'sso.canvaslms.com/jwks' is not an http(s) address" in out
    engine = make_engine(url)
    with Session(engine) as session:
        assert session.scalars(select(Platform)).first() is None
    engine.dispose()


def test_rotate_key_keeps_the_old_key_published_and_link_context_connects_a_course(url: str) -> None:
    assert run("lti", "add-platform", *LMS)[0] == 0
    code, out = run("lti", "rotate-key")
    assert code == 0 and "retired" in out
    engine = make_engine(url)
    with Session(engine) as session:
        from app.db import utcnow
        from app.lti import keys

        published = {k["kid"] for k in keys.published(session=session, now=utcnow())["keys"]}
        assert len(published) == 2  # the new key and the one it replaced
    code, out = run(
        "lti", "link-context", "--issuer", "https://canvas.instructure.com", "--client-id", "10000000000042",
        "--context", "course-7", "--course", "default",
    )  # fmt: skip
    assert code == 0, out
    code, out = run(
        "lti", "link-context", "--issuer", "https://nowhere.example", "--client-id", "1", "--context", "x",
        "--course", "default",
    )  # fmt: skip
    assert code == 1 and "No LMS is registered" in out
    with Session(engine) as session:
        assert session.scalars(select(ContextLink.course_id)).one() == "default"
    engine.dispose()
