"""Asynchronous checkpointing: save in a background thread while training goes on.

The grader's driver (driver.py, read it) trains a model and, every few steps, calls
``save(step, state)`` with the live ``model.state_dict()`` and ``optimizer.state_dict()``;
after the last step it calls ``wait()``. Put checkpoints on disk only with ``write(state, path)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class AsyncCheckpointer:
    def __init__(self, directory: str, write: Callable[[Any, str], None]) -> None:
        """``directory``: where the checkpoints go (it exists); ``write(state, path)``: the storage."""
        self.directory = directory
        self.write = write

    def save(self, step: int, state: dict[str, Any]) -> None:
        """Start writing ``state`` as ``directory/step-<step>.pt`` in a background thread, and return at once.

        The checkpoint must hold ``state`` as it is now, although training goes on changing it; a save
        still in flight finishes first; the file appears under its name only once it is complete.
        """
        raise NotImplementedError("copy the state, then write it from a background thread")

    def wait(self) -> None:
        """Return once every checkpoint saved so far is on disk."""
        raise NotImplementedError("join the write in flight")
