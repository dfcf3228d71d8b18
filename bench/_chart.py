"""A series over time as a small terminal chart, or as an SVG file (no plotting library needed)."""

from __future__ import annotations

from html import escape
from pathlib import Path


def ascii_chart(values: list[int], step_s: float, *, width: int = 72, height: int = 8) -> list[str]:
    """Lines of a column chart of ``values`` (one every ``step_s`` seconds); each column is the
    highest value of the samples it covers when there are more samples than ``width``."""
    if not values:
        return ["  (no samples)"]
    per = max(1, -(-len(values) // width))
    columns = [max(values[i : i + per]) for i in range(0, len(values), per)]
    top = max(max(columns), 1)
    label = len(str(top))
    lines = []
    for level in range(height, 0, -1):
        floor = top * (level - 0.5) / height
        tick = str(top) if level == height else "0" if level == 1 else ""
        lines.append(f"  {tick:>{label}} |" + "".join("#" if v >= floor and v > 0 else " " for v in columns))
    span = len(values) * step_s
    axis = f"0 s{'':^{max(0, len(columns) - 3 - len(f'{span:.0f} s'))}}{span:.0f} s"
    lines.append(f"  {'':>{label}} +" + "-" * len(columns))
    lines.append(f"  {'':>{label}}  {axis}")
    return lines


def write_svg(path: Path, values: list[int], step_s: float, *, title: str, y_label: str) -> None:
    """``values`` (one every ``step_s`` seconds) as a line chart with labelled axes."""
    if path.suffix.lower() != ".svg":
        raise SystemExit(f"--chart {path}: only .svg charts are written (no plotting library is installed)")
    w, h, left, right, top_pad, bottom = 720, 300, 56, 16, 36, 40
    plot_w, plot_h = w - left - right, h - top_pad - bottom
    tick = max(1, -(-max(values, default=0) // 4))  # whole numbers on the y axis, four steps up to the top
    top = 4 * tick
    span = max(len(values) - 1, 1) * step_s

    def xy(i: int, v: int) -> str:
        return f"{left + plot_w * i * step_s / span:.1f},{top_pad + plot_h * (1 - v / top):.1f}"

    points = " ".join(xy(i, v) for i, v in enumerate(values))
    grid = []
    for k in range(5):
        y = top_pad + plot_h * (1 - k / 4)
        grid.append(f'<line x1="{left}" y1="{y:.1f}" x2="{w - right}" y2="{y:.1f}" stroke="#ccc"/>')
        grid.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{k * tick}</text>')
    every = max(1, -(-int(span) // 5))  # whole seconds on the x axis, about five steps
    for second in range(0, int(span) + 1, every):
        x = left + plot_w * second / span
        grid.append(f'<text x="{x:.1f}" y="{h - bottom + 16}" text-anchor="middle">{second}</text>')
    svg = f"""<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" role="img"
 font-family="sans-serif" font-size="12" fill="#222">
<title>{escape(title)}</title>
<rect width="{w}" height="{h}" fill="#fff"/>
<text x="{left}" y="20" font-size="14">{escape(title)}</text>
{chr(10).join(grid)}
<line x1="{left}" y1="{top_pad + plot_h}" x2="{w - right}" y2="{top_pad + plot_h}" stroke="#222"/>
<polyline points="{points}" fill="none" stroke="#1f5fa8" stroke-width="2"/>
<text x="{left + plot_w / 2}" y="{h - 6}" text-anchor="middle">seconds since the rush began</text>
<text x="14" y="{top_pad + plot_h / 2}" text-anchor="middle"
 transform="rotate(-90 14 {top_pad + plot_h / 2})">{escape(y_label)}</text>
</svg>
"""
    path.write_text(svg)
