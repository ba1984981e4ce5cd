"""Charts as inline SVG: no plotting library, no script, readable in any browser and in files.

A chart is a ``<svg class="chart" data-chart=NAME>`` element; each series is a ``<polyline>``
(line charts) or a set of ``<rect>`` (bar charts) with ``data-series`` naming it, and every point
carries a ``<title>`` with its value, so the numbers can be read back from the page.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 720, 300
LEFT, RIGHT, TOP, BOTTOM = 56, 16, 40, 48
#: One colour per quantity, the same in every chart of a report.
CORRECTED, CORRECTED_REACHING, VLLM, SKIP_SHARE = "#1f77b4", "#9467bd", "#d62728", "#ff7f0e"


@dataclass(frozen=True)
class Series:
    """One line: a name for the legend, its colour, and a y value (or None: a gap) per x label."""

    name: str
    colour: str
    values: Sequence[float | None]


def line_chart(name: str, title: str, x_labels: Sequence[str], series: Sequence[Series], *,
               y_max: float | None = 1.0, y_format: str = "{:.0%}") -> str:
    """A line chart over categorical x positions (time buckets, positions, context buckets)."""
    top = y_max if y_max is not None else max((v for s in series for v in s.values if v is not None), default=1.0)
    top = top or 1.0
    parts = [_frame(name, title, top, y_format)]
    parts += _x_axis(x_labels)
    for line in series:
        color = line.colour
        points = [(_x(i, len(x_labels)), _y(v, top)) for i, v in enumerate(line.values) if v is not None]
        segments = _segments(line.values, len(x_labels), top)
        for segment in segments:
            coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in segment)
            parts.append(f'<polyline data-series="{escape(line.name)}" fill="none" stroke="{color}" '
                         f'stroke-width="2" points="{coords}"/>')
        for (x, y), (label, value) in zip(points, _present(x_labels, line.values), strict=True):
            parts.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2.5" fill="{color}" data-series="{escape(line.name)}" '
                         f'data-value="{value!r}"><title>{escape(line.name)} @ {escape(label)}: '
                         f'{escape(y_format.format(value))}</title></circle>')
    parts.append(_legend(series))
    parts.append("</svg>")
    return "\n".join(parts)


def bar_chart(name: str, title: str, labels: Sequence[str], values: Sequence[float], *,
              y_max: float | None = 1.0, y_format: str = "{:.0%}") -> str:
    """A bar chart: one bar per label."""
    top = y_max if y_max is not None else max(values, default=1.0)
    top = top or 1.0
    parts = [_frame(name, title, top, y_format)]
    parts += _x_axis(labels)
    slot = (WIDTH - LEFT - RIGHT) / max(len(labels), 1)
    for i, (label, value) in enumerate(zip(labels, values, strict=True)):
        y = _y(value, top)
        x = LEFT + i * slot + slot * 0.15
        parts.append(f'<rect data-series="{escape(title)}" data-value="{value!r}" x="{x:.1f}" y="{y:.1f}" '
                     f'width="{slot * 0.7:.1f}" height="{HEIGHT - BOTTOM - y:.1f}" fill="{CORRECTED}">'
                     f'<title>{escape(label)}: {escape(y_format.format(value))}</title></rect>')
    parts.append("</svg>")
    return "\n".join(parts)


def _frame(name: str, title: str, top: float, y_format: str) -> str:
    lines = [f'<svg class="chart" data-chart="{escape(name)}" xmlns="http://www.w3.org/2000/svg" '
             f'viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" '
             f'aria-label="{escape(title)}" font-family="sans-serif" font-size="11">',
             f"<title>{escape(title)}</title>",
             f'<text x="{LEFT}" y="20" font-size="14" font-weight="bold">{escape(title)}</text>']
    for i in range(5):
        value = top * i / 4
        y = _y(value, top)
        lines.append(f'<line x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        lines.append(f'<text x="{LEFT - 6}" y="{y + 4:.1f}" text-anchor="end">{escape(y_format.format(value))}</text>')
    return "\n".join(lines)


def _x_axis(labels: Sequence[str]) -> list[str]:
    """Labels under the plot, thinned to at most ~10 so they do not overlap."""
    every = max(1, -(-len(labels) // 10))
    return [f'<text x="{_x(i, len(labels)):.1f}" y="{HEIGHT - BOTTOM + 16}" text-anchor="middle">{escape(label)}</text>'
            for i, label in enumerate(labels) if i % every == 0]


def _legend(series: Sequence[Series]) -> str:
    items, x = [], LEFT
    for i, line in enumerate(series):
        if i:
            x += 28 + 6 * len(series[i - 1].name)  # about 6 px per character at font-size 11
        items.append(f'<rect x="{x}" y="{HEIGHT - 18}" width="12" height="4" fill="{line.colour}"/>'
                     f'<text x="{x + 16}" y="{HEIGHT - 13}">{escape(line.name)}</text>')
    return "\n".join(items)


def _x(index: int, count: int) -> float:
    plot = WIDTH - LEFT - RIGHT
    return LEFT + plot * (index + 0.5) / max(count, 1)


def _y(value: float, top: float) -> float:
    plot = HEIGHT - TOP - BOTTOM
    return TOP + plot * (1 - min(max(value / top, 0.0), 1.0))


def _segments(values: Sequence[float | None], count: int, top: float) -> list[list[tuple[float, float]]]:
    """Runs of two or more consecutive values: a gap (None) breaks the line; a lone point is
    only a dot."""
    segments: list[list[tuple[float, float]]] = [[]]
    for i, value in enumerate(values):
        if value is None:
            segments.append([])
        else:
            segments[-1].append((_x(i, count), _y(value, top)))
    return [s for s in segments if len(s) > 1]


def _present(labels: Sequence[str], values: Sequence[float | None]) -> list[tuple[str, float]]:
    return [(label, value) for label, value in zip(labels, values, strict=True) if value is not None]
