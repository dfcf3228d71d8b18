"""Database rows for lab submissions and the grading queue."""

from __future__ import annotations
