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

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 260, 56, 24, 28, 40
MAX_SERIES, MAX_POINTS = 8, 500
LEGEND_ROW = 18  # the legend, under the plot: one row per series
LEGEND_CHARS = (WIDTH - LEFT - 36) // 7
DASH = "6 4"  # theory lines


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


def _series(chart: dict[str, Any]) -> list[tuple[str, list[tuple[float, float]], bool, int]]:
    """(name, points, theory?, colour) of each drawable series, in drawing order: the measured or replayed
    series first, then the theory lines, dashed, on top of them. Series with the same ``group`` share a colour."""
    raw = [s for s in chart["series"][:MAX_SERIES] if isinstance(s, dict)]
    groups: dict[str, int] = {}
    out = []
    for i, s in enumerate(raw):
        pts = _points(s)
        if not pts:
            continue
        group = str(s.get("group", i))
        colour = groups.setdefault(group, len(groups))
        out.append((str(s.get("name", "")), pts, s.get("style") == "theory", colour))
    return [x for x in out if not x[2]] + [x for x in out if x[2]]


def _marker(shape: int, x: float, y: float, cls: str) -> str:
    """A point marker; its shape tells series apart without colour (circle, square, triangle, diamond)."""
    if shape % 4 == 0:
        return f'<circle class="{cls}" cx="{x:.1f}" cy="{y:.1f}" r="3.5"/>'
    if shape % 4 == 1:
        return f'<rect class="{cls}" x="{x - 3.5:.1f}" y="{y - 3.5:.1f}" width="7" height="7"/>'
    if shape % 4 == 2:
        corners = [(x, y - 4.5), (x + 4, y + 3), (x - 4, y + 3)]
    else:
        corners = [(x, y - 4.5), (x + 4.5, y), (x, y + 4.5), (x - 4.5, y)]
    return f'<polygon class="{cls}" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in corners)}"/>'


def _fit(name: str) -> str:
    # The legend runs the plot's width; at 11px a character is under 7 units wide.
    return name if len(name) <= LEGEND_CHARS else name[: LEGEND_CHARS - 1] + "…"


def line_chart(chart: Any) -> Markup | None:
    """An SVG line chart of ``chart`` ({"title", "x_label", "y_label", "series": [{"name", "points"}]}), or None.

    A series may say ``"style": "theory"`` (drawn dashed, after every other series so it stays visible)
    and ``"group"`` (series of one group share a colour). The legend sits under the plot, one line per
    series, inside the viewBox, so it scales with the chart on a narrow screen instead of being cut off.
    """
    if not isinstance(chart, dict) or not isinstance(chart.get("series"), list):
        return None
    series = _series(chart)
    if not series:
        return None
    xs = [x for _, pts, _, _ in series for x, _ in pts]
    ys = [y for _, pts, _, _ in series for _, y in pts]
    x0, x1 = min(xs), max(xs) if max(xs) > min(xs) else min(xs) + 1
    y0, y1 = min(ys), max(ys) if max(ys) > min(ys) else min(ys) + 1
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    height = HEIGHT + LEGEND_ROW * len(series) + 8

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
    legend = []
    for row, (name, pts, theory, colour) in enumerate(series):
        cls = f"series-{colour}" + (" theory" if theory else "")
        dash = f' stroke-dasharray="{DASH}"' if theory else ""
        path = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in pts)
        body.append(f'<polyline class="{cls}" points="{path}"{dash}><title>{escape(name)}</title></polyline>')
        if not theory:
            body.extend(_marker(row, px(x), py(y), f"marker series-{colour}") for x, y in pts)
        ly = HEIGHT + LEGEND_ROW * row + 4
        legend.append(f'<line class="{cls}" x1="{LEFT}" y1="{ly}" x2="{LEFT + 28}" y2="{ly}"{dash}/>')
        if not theory:
            legend.append(_marker(row, LEFT + 14, ly, f"marker series-{colour}"))
        legend.append(f'<text class="legend" x="{LEFT + 36}" y="{ly + 4}">{escape(_fit(name))}</text>')
    return Markup(
        f'<svg class="chart line-chart" viewBox="0 0 {WIDTH} {height}" role="img" aria-label="{title}" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}<g class="chart-legend">{"".join(legend)}</g></svg>'
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
