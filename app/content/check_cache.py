"""What the content check found last time, for the slow steps whose inputs have not changed.

The content check's slowest steps are pure: a lab folder's Python parsed and held to the checks
contract, its mutant diffs applied and compiled, a Markdown field's formulas rendered. Each result
is kept under a digest of everything that step read (the texts, and the source of the code that
checks them, and the Python version), so a change to any of them, a file or the checker, is a
miss and is checked afresh. Only `ringlab content check` keeps one (in the data directory): the
app's own loading never reads or writes it. A cache that cannot be read is an empty one.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

# The code whose results are kept: a change to any of it is a change of every key.
CHECKERS = (
    "app/content/labs.py",
    "app/content/markdown.py",
    "labs/spec/__init__.py",
    "labs/spec/contract.py",
    "labs/spec/mutants.py",
    "labs/spec/precheck.py",
    "labs/authoring/__init__.py",
)
REPO = Path(__file__).resolve().parents[2]


@functools.cache
def _code() -> str:
    digest = hashlib.sha256(sys.version.encode())
    for name in CHECKERS:
        digest.update(name.encode() + b"\0" + (REPO / name).read_bytes())
    return digest.hexdigest()


class CheckCache:
    """Results by key, loaded from ``path`` and written back by ``save`` (only the entries used this run)."""

    def __init__(self, path: Path):
        self.path = path
        self.used: dict[str, Any] = {}
        try:
            self.stored: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))["entries"]
            if not isinstance(self.stored, dict):
                raise TypeError
        except (OSError, ValueError, KeyError, TypeError):
            self.stored = {}

    @staticmethod
    def key(kind: str, *texts: str) -> str:
        digest = hashlib.sha256(f"{kind}\0{_code()}".encode())
        for text in texts:
            digest.update(b"\0" + hashlib.sha256(text.encode()).digest())
        return digest.hexdigest()

    def get(self, key: str) -> Any | None:
        found = self.stored.get(key)
        if found is not None:
            self.used[key] = found
        return found

    def put(self, key: str, value: Any) -> None:
        self.used[key] = value

    def save(self) -> None:
        """Write the entries used this run (so entries for texts that are gone are dropped), atomically."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".content-check-")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump({"entries": self.used}, f)
            os.replace(tmp, self.path)
        except OSError:
            pass  # a cache that cannot be written only costs the next run its speed
