"""``app.paths`` reads the data and content folders as ``app.config.Settings`` does, without it."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.config import Settings
from app.paths import DEFAULTS, setting_path

NAMES = ("data_dir", "content_dir")


@pytest.fixture
def clean(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for name in NAMES:
        monkeypatch.delenv(f"RINGLAB_{name.upper()}", raising=False)
    monkeypatch.chdir(tmp_path)  # no .env here unless a test writes one
    return tmp_path


def both(name: str) -> tuple[Path, Path]:
    return setting_path(name), getattr(Settings(), name)


def test_the_defaults(clean: Path) -> None:
    for name in NAMES:
        assert both(name) == (DEFAULTS[name], DEFAULTS[name])


def test_a_variable_in_any_case_wins_over_the_env_file(clean: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (clean / ".env").write_text("RINGLAB_DATA_DIR=/from/the/file\nringlab_content_dir=/content/from/the/file\n")
    assert both("data_dir") == (Path("/from/the/file"), Path("/from/the/file"))
    assert both("content_dir") == (Path("/content/from/the/file"),) * 2
    monkeypatch.setenv("ringlab_data_dir", "/from/the/environment")
    assert both("data_dir") == (Path("/from/the/environment"),) * 2
