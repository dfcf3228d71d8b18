"""Scoring, pass marks, scoring-guide tiers and option order: pure functions, exact values."""

from __future__ import annotations

import pytest

from app.quizzes import scoring
from app.quizzes.scoring import Item

GUIDE = [
    {"min": 25, "max": 25, "level": "Expert level", "recommendation": "Ready"},
    {"min": 20, "max": 24, "level": "Strong understanding", "recommendation": "Minor gaps"},
    {"min": 16, "max": 19, "level": "Good foundation", "recommendation": "Review"},
    {"min": 0, "max": 15, "level": "Need more study", "recommendation": "Revisit"},
]
SECTIONS = [{"id": "a", "title": "Alpha"}, {"id": "b", "title": "Beta"}]


def items(n: int = 25) -> list[Item]:
    return [Item(f"q{i:02d}", "a" if i < 10 else "b", "ABCD"[i % 4]) for i in range(n)]


def test_all_right_is_full_marks_top_tier_and_a_pass() -> None:
    qs = items()
    result = scoring.score(qs, {q.id: q.answer for q in qs}, sections=SECTIONS, passing_score=0.8, guide=GUIDE)
    assert (result.score, result.max_score, result.percent, result.passed) == (25, 25, 100.0, True)
    assert result.tier == scoring.Tier("Expert level", "Ready")
    assert [(s.id, s.title, s.score, s.max_score) for s in result.sections] == [
        ("a", "Alpha", 10, 10),
        ("b", "Beta", 15, 15),
    ]
    assert result.unanswered == 0


def test_nineteen_right_fails_at_eighty_percent_and_is_good_foundation() -> None:
    qs = items()
    choices = {q.id: q.answer for q in qs[:19]} | {q.id: "Z" for q in qs[19:22]}
    result = scoring.score(qs, choices, sections=SECTIONS, passing_score=0.8, guide=GUIDE)
    assert (result.score, result.percent, result.passed) == (19, 76.0, False)
    assert result.tier is not None and result.tier.level == "Good foundation"
    assert result.unanswered == 3
    assert [(s.score, s.max_score) for s in result.sections] == [(10, 10), (9, 15)]
    wrong = [m for m in result.marks if not m.correct]
    assert [(m.id, m.choice) for m in wrong] == [
        ("q19", "Z"),
        ("q20", "Z"),
        ("q21", "Z"),
        ("q22", None),
        ("q23", None),
        ("q24", None),
    ]


@pytest.mark.parametrize(
    ("score", "level"),
    [
        (25, "Expert level"),
        (24, "Strong understanding"),
        (20, "Strong understanding"),
        (19, "Good foundation"),
        (16, "Good foundation"),
        (15, "Need more study"),
        (0, "Need more study"),
    ],
)
def test_tier_boundaries_are_inclusive(score: int, level: str) -> None:
    tier = scoring.tier_for(score, GUIDE)
    assert tier is not None and tier.level == level


def test_no_tier_outside_the_guide() -> None:
    assert scoring.tier_for(26, GUIDE) is None
    assert scoring.tier_for(3, []) is None


@pytest.mark.parametrize(
    ("fraction", "questions", "mark"), [(0.8, 25, 20), (0.7, 10, 7), (0.75, 15, 12), (1.0, 3, 3), (None, 10, None)]
)
def test_pass_mark_rounds_up(fraction: float | None, questions: int, mark: int | None) -> None:
    assert scoring.pass_mark(fraction, questions) == mark


def test_no_passing_score_means_no_verdict() -> None:
    assert scoring.passed(3, 15, None) is None
    assert scoring.passed(20, 25, 0.8) is True and scoring.passed(19, 25, 0.8) is False


def test_questions_without_a_known_section_are_grouped_last() -> None:
    qs = [Item("x", None, "A"), Item("y", "a", "B")]
    result = scoring.score(qs, {"x": "A"}, sections=SECTIONS)
    assert [(s.id, s.title, s.score, s.max_score) for s in result.sections] == [
        ("a", "Alpha", 0, 1),
        (None, "Questions", 1, 1),
    ]
    assert scoring.percent(0, 0) == 0.0


def test_option_order_is_stable_within_an_attempt_and_varies_between() -> None:
    keys = ["A", "B", "C", "D", "E"]
    assert scoring.option_order(keys, seed=1, question_id="q", shuffle=False) == keys
    first = scoring.option_order(keys, seed=7, question_id="q1", shuffle=True)
    assert first == scoring.option_order(keys, seed=7, question_id="q1", shuffle=True)
    assert sorted(first) == keys
    orders = {tuple(scoring.option_order(keys, seed=s, question_id="q1", shuffle=True)) for s in range(20)}
    assert len(orders) > 5


def test_question_order_follows_sections_then_authoring() -> None:
    pairs = [("q1", "b"), ("q2", "a"), ("q3", "b"), ("q4", None), ("q5", "a")]
    assert scoring.question_order(pairs, SECTIONS) == ["q2", "q5", "q1", "q3", "q4"]
