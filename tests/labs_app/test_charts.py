"""Line charts from a check's data: drawn when well formed, ignored otherwise."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from types import ModuleType

from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from app.db import utcnow
from app.labs import charts
from app.labs.models import Submission, SubmissionStatus
from tests.factories import make_user, sign_in

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


def _schedule() -> ModuleType:
    """pipeline-gpipe's trusted schedule helpers (they import nothing heavy)."""
    path = Path(__file__).resolve().parents[2] / "content" / "labs" / "pipeline-gpipe" / "schedule.py"
    spec = importlib.util.spec_from_file_location("pipeline_gpipe_schedule", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# As the bubble check collects them: theory for every M, the replayed schedule, and (timed runs) a wall
# clock that rises with M on a busy machine, the opposite of the lesson.
GPIPE_2 = [[1, 0.5], [2, 0.3333], [4, 0.2], [8, 0.1111]]
GPIPE_4 = [[1, 0.75], [2, 0.6], [4, 0.4286], [8, 0.2727]]
SERIES = {
    2: {"theory": GPIPE_2, "schedule": GPIPE_2, "measured": [[1, 0.41], [2, 0.45], [4, 0.52], [8, 0.61]]},
    4: {"theory": GPIPE_4, "schedule": GPIPE_4},
}


def test_the_bubble_chart_draws_the_replayed_schedule_against_the_theory_and_no_wall_clock() -> None:
    schedule = _schedule()
    chart = schedule.chart(SERIES)
    assert [(s["name"], s.get("style"), s["group"]) for s in chart["series"]] == [
        ("N = 2: your schedule, replayed", None, 2), ("N = 2: theory (N-1)/(M+N-1)", "theory", 2),
        ("N = 4: your schedule, replayed", None, 4), ("N = 4: theory (N-1)/(M+N-1)", "theory", 4),
    ]  # fmt: skip
    assert all(s["points"] != SERIES[2]["measured"] for s in chart["series"])
    assert all(
        abs(y - schedule.theory(n, int(m))) < 1e-4
        for s, n in zip(chart["series"], (2, 2, 4, 4), strict=True)
        for m, y in s["points"]
    )
    table = schedule.measured_table(SERIES)
    assert table["caption"].startswith("Measured wall clock (noisy, not judged)")
    assert table["rows"][0] == ["N = 2, M = 1", "0.410", "0.500"] and len(table["rows"]) == 4
    assert schedule.measured_table({4: {"theory": [], "schedule": []}}) is None


def test_the_bubble_svg_fits_its_legend_and_draws_the_dashed_theory_last() -> None:
    svg = str(charts.line_chart(_schedule().chart(SERIES)))
    view = re.search(r'viewBox="0 0 (\d+) (\d+)"', svg)
    assert view is not None
    width, height = (int(v) for v in view.groups())
    # Every legend entry, text included (at most 7 units a character at 11px), lies inside the viewBox.
    legend = svg[svg.index('<g class="chart-legend">') :]
    texts = re.findall(r'<text class="legend" x="([\d.]+)" y="([\d.]+)">([^<]+)</text>', legend)
    assert [t[2] for t in texts] == ["N = 2: your schedule, replayed", "N = 4: your schedule, replayed",
                                     "N = 2: theory (N-1)/(M+N-1)", "N = 4: theory (N-1)/(M+N-1)"]  # fmt: skip
    assert all(float(x) + 7 * len(name) <= width and float(y) + 4 <= height for x, y, name in texts)
    assert all(float(v) <= height for v in re.findall(r'\by[12]?="([\d.]+)"', svg))
    assert all(float(v) <= width for v in re.findall(r'\bx[12]?="([\d.]+)"', svg))
    # The student's lines first, with markers; the theory after them, dashed, in the same colour per N.
    polyline = r'<polyline class="([^"]+)" points="[^"]+"( stroke-dasharray="6 4")?><title>([^<]+)</title>'
    lines = re.findall(polyline, svg)
    assert lines == [
        ("series-0", "", "N = 2: your schedule, replayed"), ("series-1", "", "N = 4: your schedule, replayed"),
        ("series-0 theory", ' stroke-dasharray="6 4"', "N = 2: theory (N-1)/(M+N-1)"),
        ("series-1 theory", ' stroke-dasharray="6 4"', "N = 4: theory (N-1)/(M+N-1)"),
    ]  # fmt: skip
    assert svg.count('class="marker series-') == 8 + 2  # a marker per replayed point, one per legend sample
    assert "wall clock" not in svg


def test_a_long_series_name_is_shortened_to_fit() -> None:
    long = {"series": [{"name": "x" * 200, "points": [[0, 1], [1, 2]]}]}
    svg = str(charts.line_chart(long))
    name = re.search(r'<text class="legend"[^>]*>([^<]+)</text>', svg)
    assert name is not None and len(name.group(1)) == charts.LEGEND_CHARS and name.group(1).endswith("…")


def test_the_result_page_shows_the_chart_its_numbers_and_the_wall_clock_table_apart(
    client: TestClient, session: Session
) -> None:
    schedule = _schedule()
    student = make_user(session, "bubble-chart")
    now = utcnow()
    data = {"chart": schedule.chart(SERIES), "table": schedule.measured_table(SERIES)}
    checks = [{"id": "bubble", "title": "t", "points": 0, "passed": True, "score": 0, "message": "ok", "data": data}]
    row = Submission(
        user_id=student.id, lab_id="pipeline-gpipe", code="x = 1\n", status=SubmissionStatus.graded, submitted_at=now,
        queued_at=now, started_at=now, finished_at=now, score=10, max_score=10,
        verdict={"lab": "pipeline-gpipe", "status": "passed", "score": 10, "max_score": 10, "message": "m",
                 "checks": checks},
    )  # fmt: skip
    session.add(row)
    session.commit()
    sign_in(client, "bubble-chart")
    page = client.get(f"/labs/submissions/{row.id}", headers={"HX-Request": "true"}).text
    figure = page[page.index('<figure class="lab-chart">') :]
    figure = figure[: figure.index("</figure>")]
    assert 'role="img" aria-label="Pipeline bubble: the share of each stage&#x27;s time spent waiting"' in figure
    # The text alternative: every series and point, the theory among them; no wall clock in the figure.
    assert "<summary>The numbers</summary>" in figure and "N = 4: theory (N-1)/(M+N-1)" in figure
    assert "wall clock" not in figure
    table = page[page.index('data-check-table="bubble"') :]
    table = table[: table.index("</table>")]
    assert "Measured wall clock (noisy, not judged)" in table and '<th scope="row">N = 2, M = 8</th>' in table
