"""Shared fixtures: where the repository, its content and the seed documents are."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from app.content.loader import load_tree
from app.content.models import ContentTree

REPO = Path(__file__).resolve().parents[1]
CONTENT_DIR = REPO / "content"


@pytest.fixture(scope="session")
def seeds_dir() -> Path:
    """The source documents every content item was imported from."""
    path = Path(os.environ.get("RINGLAB_SEEDS_DIR", REPO.parent / "shared" / "seeds"))
    assert path.is_dir(), f"seed documents not found at {path} (set RINGLAB_SEEDS_DIR)"
    return path


@pytest.fixture(scope="session")
def content_tree() -> ContentTree:
    """The repository's content/ tree, loaded and validated."""
    return load_tree(CONTENT_DIR)
