"""Database rows for flashcards (per-student state)."""

from __future__ import annotations
