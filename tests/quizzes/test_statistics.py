"""Item statistics: facility, discrimination, point-biserial, flags, distribution chart."""

from __future__ import annotations

import pytest

from app.quizzes import statistics as st
from app.quizzes.statistics import ItemInfo


def result(marks: dict[str, str | None], key: dict[str, str]) -> dict[str, object]:
    rows = [{"id": q, "choice": c, "correct": c == key[q]} for q, c in marks.items()]
    return {"score": sum(r["correct"] for r in rows), "max_score": len(key), "marks": rows}


def test_correlation_and_discrimination_exact_values() -> None:
    assert st.correlation([1, 0, 1, 0], [3, 1, 2, 0]) == pytest.approx(0.8944271909999159)
    assert st.correlation([1, 1, 1], [1, 2, 3]) is None
    assert st.correlation([1], [1]) is None
    # 10 attempts: groups of round(2.7) = 3.
    totals = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    correct = [0, 0, 1, 0, 1, 0, 1, 1, 1, 1]
    assert st.discrimination(correct, totals) == pytest.approx(1 - 1 / 3)
    assert st.discrimination([1], [5]) is None


def test_quiz_stats_over_results() -> None:
    key = {"q1": "A", "q2": "B", "q3": "C"}
    items = [
        ItemInfo("q1", 1, ["A", "B", "C"], "A"),
        ItemInfo("q2", 2, ["A", "B"], "B"),
        ItemInfo("q3", 3, ["C", "D"], "C"),
    ]
    results = [
        result({"q1": "A", "q2": "B", "q3": "C"}, key),
        result({"q1": "A", "q2": "B", "q3": "D"}, key),
        result({"q1": "A", "q2": "A", "q3": "D"}, key),
        result({"q1": "B", "q2": "A", "q3": "C"}, key),
        result({"q1": "C", "q2": None, "q3": "C"}, key),
        result({"q1": "B", "q2": None, "q3": "D"}, key),
    ]
    stats = st.quiz_stats("T", items, results)
    assert stats.attempts == 6 and stats.max_score == 3
    assert [r["score"] for r in results] == [3, 2, 1, 1, 1, 0]
    assert stats.mean == pytest.approx(1.33)
    assert stats.median == 1
    assert stats.distribution == [1, 3, 1, 1]
    q1, q2, q3 = stats.items
    assert q1.facility == pytest.approx(0.5) and q1.options == {"A": 3, "B": 2, "C": 1} and q1.blank == 0
    assert q2.options == {"A": 2, "B": 2} and q2.blank == 2
    # Groups of round(1.62) = 2. Ranked by total (ties keep their order): bottom are the
    # attempts scoring 0 and the first 1 (q1 wrong, right), top the 2 and the 3 (both right).
    assert q1.discrimination == pytest.approx(0.5)
    assert q1.flag is None
    assert q3.point_biserial is not None and q3.point_biserial < 0
    assert q3.flag is not None and q3.flag.startswith("negative")
    assert stats.flagged == 1


def test_flags_need_enough_attempts_and_catch_poor_or_flat_items() -> None:
    assert st.flag_for(-0.5, -0.5, st.MIN_ATTEMPTS - 1) is None
    assert st.flag_for(0.1, 0.5, 10) == "discriminates poorly"
    assert st.flag_for(0.5, 0.1, 10) == "discriminates poorly"
    assert st.flag_for(0.5, 0.4, 10) is None
    assert st.flag_for(None, None, 10) == "everyone scored the same on it"


def test_histogram_and_chart_geometry() -> None:
    counts = st.histogram([0, 2, 2, 5, 9], 5)
    assert counts == [1, 0, 2, 0, 0, 2]
    chart = st.bar_chart(counts, width=340, height=200, pad=20)
    assert chart.ymax == 2 and len(chart.bars) == 6
    tallest = chart.bars[2]
    assert tallest.height == pytest.approx(chart.baseline - 10) and tallest.y == pytest.approx(10)
    assert chart.bars[1].height == 0
    assert [b.label for b in chart.bars] == ["0", "1", "2", "3", "4", "5"]
    assert st.quiz_stats("empty", [ItemInfo("q", 1, ["A"], "A")], []).mean is None


def test_mode_scores_list_every_most_common_total() -> None:
    items = [ItemInfo("q1", 1, ["A", "B"], "A"), ItemInfo("q2", 2, ["A", "B"], "A")]
    key = {"q1": "A", "q2": "A"}
    results = [
        result({"q1": "A", "q2": "B"}, key),
        result({"q1": "B", "q2": "A"}, key),
        result({"q1": "A", "q2": "A"}, key),
    ]
    assert st.quiz_stats("quiz", items, results).mode_scores == [1]
    results.append(result({"q1": "A", "q2": "A"}, key))
    assert st.quiz_stats("quiz", items, results).mode_scores == [1, 2]
    assert st.quiz_stats("quiz", items, []).mode_scores == []
