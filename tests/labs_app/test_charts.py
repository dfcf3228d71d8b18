"""Line charts from a check's data: drawn when well formed, ignored otherwise."""

from __future__ import annotations

import re

from app.labs import charts

CHART = {
    "title": "Loss, batch 64",
    "x_label": "step",
    "y_label": "loss",
    "series": [
        {"name": "LAMB", "points": [[0, 2.0], [1, 1.5], [2, 1.0]]},
        {"name": "AdamW", "points": [[0, 2.0], [2, 1.8]]},
    ],
}


def test_a_series_is_one_polyline_scaled_into_the_plot() -> None:
    svg = str(charts.line_chart(CHART))
    lines = re.findall(r'<polyline class="series-(\d)" points="([^"]+)"><title>([^<]+)</title>', svg)
    assert [(i, name) for i, _, name in lines] == [("0", "LAMB"), ("1", "AdamW")]
    first = [tuple(map(float, p.split(","))) for p in lines[0][1].split()]
    assert first[0][0] == charts.LEFT and first[-1][0] == charts.WIDTH - charts.RIGHT  # x spans the plot
    assert first[0][1] == charts.TOP and first[-1][1] == charts.HEIGHT - charts.BOTTOM  # 2.0 top, 1.0 bottom
    assert 'aria-label="Loss, batch 64"' in svg and ">step<" in svg


def test_malformed_charts_are_not_drawn() -> None:
    assert charts.line_chart(None) is None
    assert charts.line_chart({"series": [{"name": "x", "points": [[0, "a"]]}]}) is None
    assert charts.line_chart({"series": [{"name": "<b>", "points": [[0, 1]]}]}) is not None
    assert "<b>" not in str(charts.line_chart({"series": [{"name": "<b>", "points": [[0, 1]]}]}))
    rows = [{"id": "a", "name": "A", "data": {"chart": CHART}}, {"id": "b", "name": "B", "data": {}}]
    assert [c["check"] for c in charts.check_charts(rows)] == ["A"]
