"""Server-rendered SVG charts for the statistics page (classes only: the CSP allows no inline styles), and
each chart's numbers as a table: the text alternative for anyone who cannot see or hover the picture."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from html import escape

from markupsafe import Markup

from app.flashcards.stats import HEATMAP_WEEKS, Stats

WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")


@dataclass(frozen=True)
class Table:
    """A chart's numbers: ``columns`` head the columns (the first one heads the row headers); each row's
    first cell is its header. A blank cell is a day the chart does not draw."""

    caption: str
    columns: tuple[str, ...]
    rows: tuple[tuple[str | int, ...], ...]


def _svg(width: int, height: int, label: str, body: list[str]) -> Markup:
    return Markup(
        f'<svg class="chart" viewBox="0 0 {width} {height}" role="img" aria-label="{escape(label)}" '
        f'xmlns="http://www.w3.org/2000/svg">{"".join(body)}</svg>'
    )


def _calendar(stats: Stats) -> list[list[date | None]]:
    """The calendar's weeks, Monday first, from the week of ``first_day`` to today's (later days None)."""
    start = stats.first_day - timedelta(days=stats.first_day.weekday())
    weeks = (stats.today - start).days // 7 + 1
    days = ((start + timedelta(days=7 * w + d) for d in range(7)) for w in range(weeks))
    return [[day if day <= stats.today else None for day in week] for week in days]


def heatmap(stats: Stats) -> Markup:
    """A calendar of reviews per day, one column per week (GitHub/Anki style)."""
    cell, gap = 12, 2
    calendar = _calendar(stats)
    start, weeks = calendar[0][0] or stats.today, len(calendar)
    top = max(stats.heatmap.values(), default=0)
    body: list[str] = []
    for w, week in enumerate(calendar):
        for d, day in enumerate(week):
            if day is None:
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
    total = sum(stats.heatmap.values())
    summary = f"Reviews per day over the last {HEATMAP_WEEKS} weeks: {total} reviews on {len(stats.heatmap)} days"
    if total:
        busiest = max(sorted(stats.heatmap), key=lambda day: stats.heatmap[day])
        summary += f", the most on {day_label(busiest)} ({stats.heatmap[busiest]})"
    return _svg(24 + weeks * (cell + gap), 14 + 7 * (cell + gap), summary, body)


def heatmap_table(stats: Stats) -> Table:
    """The calendar as a table: a row per week, a column per weekday, the reviews of each day."""
    rows = tuple(
        (f"Week of {day_label(week[0])}", *("" if day is None else stats.heatmap.get(day, 0) for day in week))
        for week in _calendar(stats)
        if week[0] is not None
    )
    total = sum(stats.heatmap.values())
    return Table(f"Reviews per day, {HEATMAP_WEEKS} weeks to {day_label(stats.today)}: {total} in all",
                 ("Week", *WEEKDAYS), rows)  # fmt: skip


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


def _forecast_labels(stats: Stats) -> list[str]:
    return ["today" if i == 0 else f"+{i}d" for i in range(len(stats.forecast))]


def forecast(stats: Stats) -> Markup:
    due, days = stats.forecast, len(stats.forecast)
    summary = f"Cards due in the next {days} days: {sum(due)} in all, {due[0] if due else 0} today"
    if sum(due):
        busiest = max(range(days), key=lambda i: (due[i], -i))
        summary += f", the most on {day_label(stats.today + timedelta(days=busiest))} ({due[busiest]})"
    return _bars(due, _forecast_labels(stats), ["bar-due"], summary, every=5)


def forecast_table(stats: Stats) -> Table:
    """The forecast as a table: each of the next days, its date and the cards due."""
    rows = tuple(
        (label, day_label(stats.today + timedelta(days=i)), n)
        for i, (label, n) in enumerate(zip(_forecast_labels(stats), stats.forecast, strict=True))
    )
    total = sum(stats.forecast)
    return Table(f"Cards due on each of the next {len(rows)} days: {total} in all", ("Day", "Date", "Cards due"), rows)


def counts(stats: Stats) -> Markup:
    names = list(stats.counts)
    summary = "Cards by state: " + ", ".join(f"{n} {stats.counts[n]}" for n in names)
    return _bars([stats.counts[n] for n in names], names, [f"bar-{n}" for n in names], summary)


def _button_names(stats: Stats, labels: dict[int, str]) -> list[tuple[int, str]]:
    return [(k, f"{k} {labels.get(k, '')}".strip()) for k in sorted(stats.buttons)]


def buttons(stats: Stats, labels: dict[int, str]) -> Markup:
    names = _button_names(stats, labels)
    summary = "Answer buttons pressed: " + ", ".join(f"{name}, {stats.buttons[k]}" for k, name in names)
    return _bars([stats.buttons[k] for k, _ in names], [n for _, n in names], [f"bar-b{k}" for k, _ in names], summary)


def buttons_table(stats: Stats, labels: dict[int, str]) -> Table:
    """The answer buttons as a table: each button, what it schedules, and how often it was pressed."""
    rows = tuple((str(k), labels.get(k, ""), stats.buttons[k]) for k in sorted(stats.buttons))
    total = sum(stats.buttons.values())
    return Table(f"Answer buttons pressed: {total} reviews in all", ("Button", "Scheduled as", "Reviews"), rows)


def day_label(day: date) -> str:
    return day.strftime("%a %d %b")
