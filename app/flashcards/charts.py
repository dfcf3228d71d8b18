"""Server-rendered SVG charts for the statistics page (classes only: the CSP allows no inline styles)."""

from __future__ import annotations

from datetime import date, timedelta
from html import escape

from markupsafe import Markup

from app.flashcards.stats import Stats


def _svg(width: int, height: int, label: str, body: list[str]) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg>'
    )


def heatmap(stats: Stats) -> Markup:
    """A calendar of reviews per day, one column per week (GitHub/Anki style)."""
    cell, gap = 12, 2
    start = stats.first_day - timedelta(days=stats.first_day.weekday())
    weeks = (stats.today - start).days // 7 + 1
    top = max(stats.heatmap.values(), default=0)
    body: list[str] = []
    for w in range(weeks):
        for d in range(7):
            day = start + timedelta(days=7 * w + d)
            if day > stats.today:
                continue
            n = stats.heatmap.get(day, 0)
            level = 0 if n == 0 else min(4, 1 + (4 * n - 1) // max(top, 1))
            body.append(
                f'<rect class="heat-{level}" x="{24 + w * (cell + gap)}" y="{14 + d * (cell + gap)}" '
                f'width="{cell}" height="{cell}" rx="2"><title>{day.isoformat()}: {n} reviews</title></rect>'
            )
    for d, name in ((0, "Mon"), (2, "Wed"), (4, "Fri")):
        body.append(f'<text class="axis" x="0" y="{24 + d * (cell + gap)}">{name}</text>')
    months: set[tuple[int, int]] = set()
    for w in range(weeks):
        day = start + timedelta(days=7 * w)
        if (day.year, day.month) not in months and day.day <= 7:
            months.add((day.year, day.month))
            body.append(f'<text class="axis" x="{24 + w * (cell + gap)}" y="10">{day.strftime("%b")}</text>')
    return _svg(24 + weeks * (cell + gap), 14 + 7 * (cell + gap), "Reviews per day", body)


def _bars(values: list[int], labels: list[str], css: list[str], label: str, every: int = 1) -> Markup:
    width, height, left, bottom = 600, 180, 30, 20
    top = max(values, default=0) or 1
    slot = (width - left) / max(len(values), 1)
    body = [f'<line class="axis-line" x1="{left}" y1="{height - bottom}" x2="{width}" y2="{height - bottom}"/>']
    body.append(f'<text class="axis" x="0" y="12">{top}</text>')
    for i, (v, name) in enumerate(zip(values, labels, strict=True)):
        h = (height - bottom - 16) * v / top
        x = left + i * slot + slot * 0.15
        body.append(
            f'<rect class="{css[i % len(css)]}" x="{x:.1f}" y="{height - bottom - h:.1f}" width="{slot * 0.7:.1f}" '
            f'height="{h:.1f}"><title>{escape(name)}: {v}</title></rect>'
        )
        if v:
            body.append(f'<text class="value" x="{x + slot * 0.35:.1f}" y="{height - bottom - h - 3:.1f}">{v}</text>')
        if i % every == 0:
            body.append(f'<text class="axis" x="{x:.1f}" y="{height - 5}">{escape(name)}</text>')
    return _svg(width, height, label, body)


def forecast(stats: Stats) -> Markup:
    labels = ["today" if i == 0 else f"+{i}d" for i in range(len(stats.forecast))]
    return _bars(stats.forecast, labels, ["bar-due"], "Cards due in the next 30 days", every=5)


def counts(stats: Stats) -> Markup:
    names = list(stats.counts)
    return _bars([stats.counts[n] for n in names], names, [f"bar-{n}" for n in names], "Cards by state")


def buttons(stats: Stats, labels: dict[int, str]) -> Markup:
    keys = sorted(stats.buttons)
    names = [f"{k} {labels.get(k, '')}".strip() for k in keys]
    return _bars([stats.buttons[k] for k in keys], names, [f"bar-b{k}" for k in keys], "Answer buttons")


def day_label(day: date) -> str:
    return day.strftime("%a %d %b")
