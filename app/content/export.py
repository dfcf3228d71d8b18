"""The content tree as plain JSON data, answers included, for instructors' tooling."""

from __future__ import annotations

from typing import Any

from app.content.models import ContentTree


def export_tree(tree: ContentTree) -> dict[str, Any]:
    """All content in the documented export shape (docs/reference/content.md, "Export")."""
    return {
        "quizzes": [
            {
                "id": quiz.id,
                "title": quiz.title,
                "description": quiz.description,
                "version": quiz.version,
                "last_updated": quiz.last_updated,
                "passing_score": quiz.passing_score,
                "time_limit_minutes": quiz.time_limit_minutes,
                "max_attempts": quiz.max_attempts,
                "show_answers": quiz.show_answers,
                "due": quiz.due.isoformat() if quiz.due else None,
                "sections": [s.model_dump() for s in quiz.sections],
                "scoring_guide": [t.model_dump() for t in quiz.scoring_guide],
                "questions": [
                    {
                        "id": q.id,
                        "section": q.section,
                        "prompt": q.prompt,
                        "options": [o.model_dump() for o in q.options],
                        "answer": q.answer,
                        "explanation": q.explanation,
                        "cards": list(q.cards),
                        "errata": [e.model_dump() for e in q.errata],
                    }
                    for q in quiz.questions
                ],
            }
            for quiz in tree.quizzes
        ],
        "exercise_sets": [
            {
                "id": s.id,
                "title": s.title,
                "description": s.description,
                "sections": [sec.model_dump() for sec in s.sections],
                "difficulty_legend": {str(k): v for k, v in s.difficulty_legend.items()},
                "exercises": [e.model_dump(exclude={"body"}) | {"body": e.body} for e in s.exercises],
            }
            for s in tree.exercise_sets
        ],
        "decks": [
            {
                "id": d.id,
                "title": d.title,
                "rating_prompt": d.rating_prompt,
                "rating_labels": {str(k): v for k, v in d.rating_labels.items()},
                "cards": [c.model_dump() for c in d.cards],
            }
            for d in tree.decks
        ],
    }
