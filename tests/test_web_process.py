"""The web process never imports torch, and healthz tells when content is missing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from app.config import Settings
from app.main import create_app
from app.migrate import upgrade

REPO = Path(__file__).resolve().parents[1]


def test_web_app_does_not_import_torch(tmp_path: Path) -> None:
    code = (
        "import sys\n"
        "from fastapi.testclient import TestClient\n"
        "from app.main import create_app\n"
        "from app.config import Settings\n"
        "from app.migrate import upgrade\n"
        f"s = Settings(data_dir=r'{tmp_path}')\n"
        "upgrade(s.sqlalchemy_url)\n"
        "with TestClient(create_app(s)) as c:\n"
        "    for p in ('/', '/quizzes', '/quizzes/module-202', '/exercises', '/flashcards', '/healthz'):\n"
        "        assert c.get(p).status_code == 200, p\n"
        "print('torch' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_healthz_is_503_before_content_is_loaded(tmp_path: Path) -> None:
    settings = Settings(data_dir=tmp_path, sync_content_on_start=False)
    upgrade(settings.sqlalchemy_url)
    with TestClient(create_app(settings)) as client:
        response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable" and body["content"] == {"ok": False}
    assert body["database"] == {"ok": True, "reachable": True, "writable": True}


def test_app_start_syncs_content_and_survives_a_broken_tree(tmp_path: Path) -> None:
    broken = tmp_path / "content" / "quizzes"
    broken.mkdir(parents=True)
    (broken / "bad.yaml").write_text("id: [oops\n")
    settings = Settings(data_dir=tmp_path, content_dir=tmp_path / "content")
    upgrade(settings.sqlalchemy_url)
    with TestClient(create_app(settings)) as client:
        assert client.get("/healthz").status_code == 503  # refused, nothing loaded yet
        assert client.get("/").status_code == 200
    good = Settings(data_dir=tmp_path)
    with TestClient(create_app(good)) as client:
        assert client.get("/healthz").status_code == 200


def test_web_threads_are_sized_for_the_database(tmp_path: Path) -> None:
    """Few threads on SQLite (CPU work under one interpreter lock), many on PostgreSQL (network waits)."""
    import anyio.to_thread

    assert Settings(data_dir=tmp_path).thread_count == 4
    assert Settings(database_url="postgresql://db/ringlab").thread_count == 40
    assert Settings(data_dir=tmp_path, web_threads=7).thread_count == 7
    settings = Settings(data_dir=tmp_path, sync_content_on_start=False, web_threads=3)
    upgrade(settings.sqlalchemy_url)
    with TestClient(create_app(settings)) as client:
        assert client.portal is not None
        tokens = client.portal.call(lambda: anyio.to_thread.current_default_thread_limiter().total_tokens)
    assert tokens == 3
