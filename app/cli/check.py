"""`ringlab content check` without the command-line framework: an author runs it after every edit, so it starts
fast (``app.cli.main()`` calls it straight away), and the other commands share its way of reporting problems."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import NoReturn


def check(path: Path | None = None) -> int:
    """Validate a content tree; print every problem as ``path:line: message``. The exit status: 0 or 1."""
    from app.content.check_cache import CheckCache
    from app.content.loader import load_tree
    from app.paths import setting_path

    # What the slow checks found for the same texts last time (app.content.check_cache).
    cache = CheckCache(setting_path("data_dir") / "cache" / "content-check.json")
    try:
        tree = load_tree(path or content_dir(), cache=cache)
    except Exception as exc:
        cache.save()
        fail_on_problems(exc)
    cache.save()
    n_questions = sum(len(q.questions) for q in tree.quizzes)
    n_exercises = sum(len(s.exercises) for s in tree.exercise_sets)
    n_cards = sum(len(d.cards) for d in tree.decks)
    n_labs = len(tree.labs)  # not every folder: content/labs/_common/ holds the helpers labs share
    print(
        f"ok: {len(tree.quizzes)} quizzes ({n_questions} questions), {len(tree.exercise_sets)} exercise sets "
        f"({n_exercises} exercises), {len(tree.decks)} decks ({n_cards} cards), {n_labs} labs"
    )
    return 0


def fail_on_problems(exc: Exception) -> NoReturn:
    """A content error's problems on stderr, then exit 1; any other exception goes on up."""
    from app.content.source import ContentError

    if isinstance(exc, ContentError):
        for problem in exc.problems:
            print(problem, file=sys.stderr)
        print(f"{len(exc.problems)} problem(s) found; nothing was changed.", file=sys.stderr)
        raise SystemExit(1)
    raise exc


def content_dir() -> Path:
    from app.paths import setting_path

    return setting_path("content_dir")
