"""Import every module that defines tables, so Base.metadata knows them all."""

from __future__ import annotations


def load_all() -> None:
    import app.accounts.models
    import app.content.records
    import app.courses.models
    import app.exercises.models
    import app.flashcards.models
    import app.labs.models
    import app.lti.models
    import app.quizzes.models
    import app.reports.models
    import app.web.health  # noqa: F401
