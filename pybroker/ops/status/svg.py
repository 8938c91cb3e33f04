"""A line chart as inline SVG, drawn on the server: the status page needs a few lines over
the last minutes, not a JavaScript charting framework. The SVG scales to the width of its
box (viewBox, width 100%), so the same markup fits a phone and a desktop.

Every text that reaches the markup (series names are group ids: user input) is escaped.
"""
from __future__ import annotations

from collections.abc import Sequence
from html import escape

__all__ = ["PALETTE", "line_chart", "human"]

WIDTH, HEIGHT = 400, 160
LEFT, RIGHT, TOP, BOTTOM = 44, 6, 10, 20
# Distinguishable, also for the common colour blindnesses (Okabe–Ito).
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000",
           "#F0E442")


def human(value: float) -> str:
    """1234567 -> '1.2M': axis labels and table cells must stay short on a phone."""
    for unit, size in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(value) >= size:
            return f"{value / size:.1f}{unit}"
    return f"{value:.0f}" if value == int(value) else f"{value:.1f}"


def _nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 5 × 10^n at or above `value` (at least 1): a readable top."""
    if value <= 1:
        return 1.0
    magnitude = 1.0
    while magnitude * 10 <= value:
        magnitude *= 10
    for step in (1, 2, 5, 10):
        if step * magnitude >= value:
            return step * magnitude
    return 10 * magnitude  # pragma: no cover - the loop always returns


def line_chart(title: str, series: Sequence[tuple[str, Sequence[tuple[float, float]]]],
               *, now: float, window: float) -> str:
    """`series`: (name, [(time, value), ...]) drawn over the last `window` seconds before
    `now`. With fewer than two points in every series, a placeholder says so."""
    drawable = [(name, points) for name, points in series if len(points) >= 2]
    head = (f'<figure class="chart"><figcaption>{escape(title)}</figcaption>')
    if not drawable:
        return head + '<p class="muted">collecting samples…</p></figure>'
    top = _nice_ceiling(max(v for _, points in drawable for _, v in points))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    start = now - window

    def x(t: float) -> float:
        return LEFT + max(0.0, min(1.0, (t - start) / window)) * plot_w

    def y(v: float) -> float:
        return TOP + plot_h - (v / top) * plot_h

    parts = [f'<svg viewBox="0 0 {WIDTH} {HEIGHT}" role="img" '
             f'aria-label="{escape(title)}">']
    for fraction in (0, 0.5, 1):
        gy = y(top * fraction)
        parts.append(f'<line x1="{LEFT}" y1="{gy:.1f}" x2="{WIDTH - RIGHT}" y2="{gy:.1f}" '
                     f'class="grid"/>')
        parts.append(f'<text x="{LEFT - 4}" y="{gy + 4:.1f}" text-anchor="end">'
                     f'{human(top * fraction)}</text>')
    minutes = window / 60
    parts.append(f'<text x="{LEFT}" y="{HEIGHT - 4}">-{minutes:g} min</text>')
    parts.append(f'<text x="{WIDTH - RIGHT}" y="{HEIGHT - 4}" text-anchor="end">now</text>')
    for index, (name, points) in enumerate(drawable):
        colour = PALETTE[index % len(PALETTE)]
        path = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v in points)
        parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" '
                     f'stroke-width="2">'
                     f'<title>{escape(name)}</title></polyline>')
    parts.append("</svg>")
    legend = "".join(
        f'<li><span class="swatch" style="background:{PALETTE[i % len(PALETTE)]}"></span>'
        f'{escape(name)} <b>{human(points[-1][1])}</b></li>'
        for i, (name, points) in enumerate(drawable))
    return head + "".join(parts) + f'<ul class="legend">{legend}</ul></figure>'
