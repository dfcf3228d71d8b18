"""Trusted helper for comm-bandwidth's checks (never mounted in a rank): the curve's table and chart.

``curve`` draws a student's bus bandwidth at each message size (from their times on ``n`` ranks) beside the
interconnect's, from its alpha and bus bandwidth, as the table and the log-log chart the result page shows.
"""

from __future__ import annotations

import math
from typing import Any

from labs.authoring import load_trusted

replay = load_trusted(__file__, "replay")


def _gbps(x: float) -> str:
    return f"{x / 1e9:.4g}"


def curve(n: int, link: dict[str, Any], sizes: list[int], times: list[float]) -> dict[str, Any]:
    """The table and chart of ``times`` (rank 0's, one per size) on ``n`` ranks against ``link``'s bus bandwidth."""
    f, alpha, bus = replay.factor(n), float(link["alpha"]), float(link["bus_bandwidth"])

    def truth(s: float) -> float:
        return f * s / (alpha + f * s / bus)

    rows, mine = [], []
    for s, t in zip(sizes, times, strict=True):
        usable = 0 < t < math.inf
        busbw = f * s / t if usable else math.nan
        rows.append([f"{s:,}", f"{t * 1e6:.4g}", _gbps(s / t) if usable else "-", _gbps(busbw), _gbps(truth(s))])
        if usable:
            mine.append([round(math.log10(s), 4), round(math.log10(busbw / 1e6), 4)])
    steps = round(4 * math.log2(4 * sizes[-1] / sizes[0]))  # from half the smallest to twice the largest
    dense = [sizes[0] / 2 * 2 ** (k / 4) for k in range(steps + 1)]
    crossover = alpha * bus / f
    chart = {
        "title": f"Bus bandwidth against message size, world size {n} (log-log)",
        "x_label": "log10 of the message size in bytes (3 = 1 KB, 6 = 1 MB)",
        "y_label": "log10 of busbw in MB/s (3 = 1 GB/s)",
        "series": [
            {"name": "your times (busbw = 2(N-1)/N x size / time)", "points": mine},
            {
                "name": "the interconnect's busbw (its alpha and B)",
                "points": [[round(math.log10(s), 4), round(math.log10(truth(s) / 1e6), 4)] for s in dense],
                "style": "theory",
            },
            {
                "name": f"its bounds: B = {bus / 1e9:.3g} GB/s, and 2(N-1)/N x s / alpha",
                "points": [
                    [round(math.log10(s), 4), round(math.log10(min(bus, f * s / alpha) / 1e6), 4)] for s in dense
                ],
                "style": "theory",
            },
        ],
    }
    table = {
        "caption": f"Your times on {n} ranks (rank 0), the bandwidths they give, and the interconnect's bus bandwidth;"
        f" the regimes cross at alpha x beta = {crossover:,.0f} bytes",
        "columns": ["size (bytes)", "your time (us)", "algbw (GB/s)", "busbw (GB/s)", "interconnect busbw (GB/s)"],
        "rows": rows,
    }
    return {"chart": chart, "table": table}
