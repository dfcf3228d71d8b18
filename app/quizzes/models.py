"""Database rows for quizzes (per-student state)."""

from __future__ import annotations
