"""The `ringlab` command: one module per group of commands (``root`` has `serve` and `worker`).

Imports stay inside commands, and `ringlab content check [PATH]`, what an author runs after every edit, is
answered without loading the command-line framework at all (``check``).
"""

from __future__ import annotations

import sys
from pathlib import Path


def main() -> None:
    args = sys.argv[1:]
    if args[:2] == ["content", "check"] and len(args) <= 3 and not any(a.startswith("-") for a in args[2:]):
        from app.cli.check import check

        raise SystemExit(check(Path(args[2]) if len(args) == 3 else None))
    from app.cli.root import app

    app()
