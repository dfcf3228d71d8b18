"""Flashcard fixtures: fuzzing off, so intervals are exact."""

from __future__ import annotations

import pytest
from fastapi import FastAPI

DECK = "mire-dis-train"


@pytest.fixture
def app(app: FastAPI) -> FastAPI:
    app.state.flashcards_fuzzing = False
    return app
