"""Charts as inline SVG drawn on the server, like the workflow graph (:mod:`._graph`).

Why no chart library: the dashboard serves everything itself (no CDN, no build step), and a
few ``<rect>`` and ``<polyline>`` elements render, scale and print in every browser. Each
chart carries its numbers in ``data-`` attributes and ``<title>`` tooltips, so a test or a
screen reader reads the values, not pixels.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from tether._cli.render import seconds, when

W, H, LEFT, BOTTOM, TOP = 560, 150, 44, 20, 10
COLOURS = {"done": "#16a34a", "failed": "#dc2626", "depth": "#d97706", "wait_avg": "#2563eb",
           "wait_max": "#93c5fd", "started": "#6b7280"}


def _frame(chart_id: str, label: str, peak: float, buckets: Sequence[float],
           unit: str) -> list[str]:
    top = seconds(peak) if unit == "s" else f"{peak:g}"
    first = when(buckets[0])[11:16] if buckets else ""  # HH:MM of the first bucket
    return [f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="{escape(chart_id)}" '
            f'width="{W}" height="{H}" viewBox="0 0 {W} {H}" role="img" '
            f'aria-label="{escape(label)}">',
            f'<line class="axis" x1="{LEFT}" y1="{H - BOTTOM}" x2="{W}" y2="{H - BOTTOM}"/>',
            f'<text class="tick" x="{LEFT - 4}" y="{TOP + 8}" text-anchor="end">{top}</text>',
            f'<text class="tick" x="{LEFT - 4}" y="{H - BOTTOM}" text-anchor="end">0</text>',
            f'<text class="tick" x="{LEFT}" y="{H - 4}">{first}</text>'
            f'<text class="tick" x="{W}" y="{H - 4}" text-anchor="end">now</text>']


def bars(chart_id: str, label: str, buckets: Sequence[float],
         stacks: dict[str, Sequence[int]]) -> str:
    """Stacked bars per bucket (e.g. done and failed jobs)."""
    n = max(1, len(buckets))
    totals = [sum(s[i] for s in stacks.values()) for i in range(len(buckets))]
    peak = max([1, *totals])
    width = (W - LEFT) / n
    out = _frame(chart_id, label, peak, buckets, "")
    for i, t in enumerate(buckets):
        y = float(H - BOTTOM)
        for name, values in stacks.items():
            v = values[i]
            if not v:
                continue
            h = v / peak * (H - BOTTOM - TOP)
            y -= h
            out.append(f'<rect class="{name}" x="{LEFT + i * width:.1f}" y="{y:.1f}" '
                       f'width="{max(1.0, width - 1):.1f}" height="{h:.1f}" '
                       f'fill="{COLOURS.get(name, "#64748b")}" data-bucket="{i}" '
                       f'data-{name}="{v}"><title>{when(t)}: {v} {name}</title></rect>')
    out.append("</svg>")
    return "".join(out)


def lines(chart_id: str, label: str, buckets: Sequence[float],
          series: dict[str, Sequence[float | None]], unit: str = "") -> str:
    """One polyline per series (gaps where a bucket has no value); ``unit`` "s": seconds."""
    n = max(1, len(buckets))
    peak = max([1e-9 if unit == "s" else 1.0,
                *(v for s in series.values() for v in s if v is not None)])
    step = (W - LEFT) / n
    out = _frame(chart_id, label, peak, buckets, unit)
    for name, values in series.items():
        points = [f"{LEFT + (i + 0.5) * step:.1f},"
                  f"{H - BOTTOM - v / peak * (H - BOTTOM - TOP):.1f}"
                  for i, v in enumerate(values) if v is not None]
        data = ",".join("" if v is None else f"{v:g}" for v in values)
        colour = COLOURS.get(name, "#64748b")
        out.append(f'<polyline class="{name}" fill="none" stroke-width="1.8" '
                   f'stroke="{colour}" points="{" ".join(points)}" '
                   f'data-values="{data}"><title>{escape(name)}</title></polyline>')
        # A dot per value: a lone value (one bucket with starts) has no line to show it.
        out += [f'<circle cx="{p.split(",")[0]}" cy="{p.split(",")[1]}" r="2" '
                f'fill="{colour}"/>' for p in points]
    out.append("</svg>")
    return "".join(out)
