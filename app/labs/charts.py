"""Line charts a lab's checks ask for (``data["chart"]``), drawn as server-rendered SVG.

Pure and defensive: a check's data came out of a grading run, so anything that is not
a well-formed chart of plain numbers is ignored rather than drawn. Classes only: the
CSP allows no inline styles.
"""

from __future__ import annotations

import math
from html import escape
from typing import Any

from markupsafe import Markup

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 260, 56, 150, 28, 40
MAX_SERIES, MAX_POINTS = 8, 500


def _points(series: Any) -> list[tuple[float, float]] | None:
    raw = series.get("points") if isinstance(series, dict) else None
    if not isinstance(raw, list) or not 0 < len(raw) <= MAX_POINTS:
        return None
    out = []
    for p in raw:
        if not (isinstance(p, list | tuple) and len(p) == 2 and all(isinstance(v, int | float) for v in p)):
            return None
        x, y = float(p[0]), float(p[1])
        if math.isfinite(x) and math.isfinite(y):
            out.append((x, y))
    return out or None


def _tick(value: float) -> str:
    return f"{value:.3g}"


def line_chart(chart: Any) -> Markup | None:
    """An SVG line chart of ``chart`` ({"title", "x_label", "y_label", "series": [{"name", "points"}]}), or None."""
    if not isinstance(chart, dict) or not isinstance(chart.get("series"), list):
        return None
    series = [(str(s.get("name", "")), pts) for s in chart["series"][:MAX_SERIES] if (pts := _points(s))]
    if not series:
        return None
    xs = [x for _, pts in series for x, _ in pts]
    ys = [y for _, pts in series for _, y in pts]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys) if max(ys) > min(ys) else min(ys) + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def px(x: float) -> float:
        return LEFT + (x - x0) / (x1 - x0) * plot_w

    def py(y: float) -> float:
        return TOP + (1 - (y - y0) / (y1 - y0)) * plot_h

    title = escape(str(chart.get("title", "")))
    body = [
        f'<text class="chart-title" x="{LEFT}" y="16">{title}</text>',
        f'<line class="axis-line" x1="{LEFT}" y1="{TOP + plot_h}" x2="{LEFT + plot_w}" y2="{TOP + plot_h}"/>',
        f'<line class="axis-line" x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{TOP + plot_h}"/>',
    ]
    for value in (y0, (y0 + y1) / 2, y1):
        body.append(
            f'<text class="axis" x="{LEFT - 6}" y="{py(value) + 4:.1f}" text-anchor="end">{_tick(value)}</text>'
        )
    for value in (x0, (x0 + x1) / 2, x1):
        body.append(
            f'<text class="axis" x="{px(value):.1f}" y="{TOP + plot_h + 16}" text-anchor="middle">{_tick(value)}</text>'
        )
    body.append(
        f'<text class="axis" x="{LEFT + plot_w / 2}" y="{HEIGHT - 6}" text-anchor="middle">'
        f"{escape(str(chart.get('x_label', '')))}</text>"
    )
    body.append(
        f'<text class="axis" x="12" y="{TOP + plot_h / 2}" transform="rotate(-90 12 {TOP + plot_h / 2})" '
        f'text-anchor="middle">{escape(str(chart.get("y_label", "")))}</text>'
    )
    for i, (name, pts) in enumerate(series):
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        body.append(f'<polyline class="series-{i}" points="{path}"><title>{escape(name)}</title></polyline>')
        ly = TOP + 14 * i + 6
        body.append(
            f'<line class="series-{i}" x1="{LEFT + plot_w + 10}" y1="{ly}" x2="{LEFT + plot_w + 26}" y2="{ly}"/>'
        )
        body.append(f'<text class="legend" x="{LEFT + plot_w + 30}" y="{ly + 4}">{escape(name)}</text>')
    return Markup(
        f'<svg class="chart line-chart" viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{title}" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg>'
    )


def check_charts(check_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each graded check's chart, in check order: {"check", "svg", "table"} (the table for screen readers)."""
    out = []
    for c in check_rows:
        chart = (c.get("data") or {}).get("chart")
        svg = line_chart(chart)
        if svg is None or not isinstance(chart, dict):
            continue
        table = [(str(s.get("name", "")), _points(s) or []) for s in chart["series"][:MAX_SERIES]]
        out.append({"check": c.get("name", c.get("id")), "svg": svg, "table": table})
    return out
