"""Studying, statistics and export never pull torch into the web process (fsrs's optimizer needs it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

CODE = """
import sys
from fastapi.testclient import TestClient
from app.config import Settings
from app.main import create_app
from app.migrate import upgrade
s = Settings(data_dir=sys.argv[1])
upgrade(s.sqlalchemy_url)
with TestClient(create_app(s)) as c:
    c.get("/signup")
    form = {"username": "tess", "password": "a-long-password", "csrf_token": c.cookies["ringlab_csrf"]}
    assert c.post("/signup", data=form, follow_redirects=False).status_code == 303
    token = c.post("/api/v1/auth/token", json={"username": "tess", "password": "a-long-password"}).json()
    auth = {"Authorization": "Bearer " + token["access_token"]}
    rating = {"card_id": "mdt-001", "rating": 4, "version": 0}
    assert c.post("/api/v1/reviews", json=rating, headers=auth).status_code == 200
    for p in ("/flashcards/mire-dis-train/study", "/flashcards/mire-dis-train/stats", "/flashcards/settings",
              "/flashcards/mire-dis-train/cards/mdt-001", "/flashcards/mire-dis-train/export.apkg",
              "/api/v1/decks/mire-dis-train/stats"):
        r = c.get(p, headers=auth)
        assert r.status_code == 200, (p, r.status_code, r.text[:300])
print("torch" in sys.modules)
"""


def test_flashcard_pages_do_not_import_torch(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-c", CODE, str(tmp_path)], cwd=REPO, capture_output=True, text=True,
                          timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "False"
