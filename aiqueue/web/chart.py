"""The /ai-queue throughput chart: bucket counts scaled to SVG geometry (pure, no I/O)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from aiqueue.web.views.text import shown


@dataclass(frozen=True)
class Bar:
    """One bucket's stacked bar: completed at the bottom, failed on top."""

    x: float
    width: float
    completed_y: float
    completed_h: float
    failed_y: float
    failed_h: float
    title: str


@dataclass(frozen=True)
class Chart:
    """SVG geometry for the throughput chart; empty buckets have no bar.

    Each series is one SVG path (a rectangle per bar), so a busy day costs two
    attributes, not a thousand; `bars` keep the geometry and the hover titles.
    """

    width: int
    height: int
    plot_height: int
    top: int
    step: float
    bars: list[Bar]
    ticks: list[tuple[float, str]]
    y_max: int
    completed: int
    failed: int
    completed_path: str
    failed_path: str


def nice_ceiling(value: int) -> int:
    """The smallest 1, 2 or 5 × 10^k at or above `value` (at least 1)."""
    if value <= 1:
        return 1
    power = int(10 ** math.floor(math.log10(value)))
    for step in (1, 2, 5, 10):
        if step * power >= value:
            return step * power
    return 10 * power


def chart(
    buckets: Sequence[tuple[datetime, int, int]],
    *,
    bucket_seconds: int = 300,
    bar_width: float = 3.0,
    plot_height: int = 100,
    tick_hours: int = 3,
) -> Chart:
    """Scale (bucket start, completed, failed) to stacked SVG bars on a shared y axis."""
    top = 8
    y_max = nice_ceiling(max((c + f for _, c, f in buckets), default=0))
    scale = plot_height / y_max
    base = top + plot_height
    inner = round(bar_width * 0.75, 2)
    bars, ticks = [], []
    for i, (start, completed, failed) in enumerate(buckets):
        x = round(i * bar_width, 2)
        # The school's clock (QUEUE_TIMEZONE): ticks at its hours.
        wall = shown(start)
        second_of_day = wall.hour * 3600 + wall.minute * 60 + wall.second
        if second_of_day % (tick_hours * 3600) == 0:
            ticks.append((x, _clock(second_of_day)))
        if completed + failed == 0:
            continue
        ch = round(completed * scale, 2)
        fh = round(failed * scale, 2)
        title = (f"{_clock(second_of_day)}–{_clock(second_of_day + bucket_seconds)} "
                 f"{wall.strftime('%Z')}: "
                 f"{completed} completed, {failed} failed")
        bars.append(Bar(x=x, width=inner, completed_y=round(base - ch, 2), completed_h=ch,
                        failed_y=round(base - ch - fh, 2), failed_h=fh, title=title))
    return Chart(
        width=math.ceil(len(buckets) * bar_width), height=base + 16, plot_height=plot_height,
        top=top, step=bar_width, bars=bars, ticks=ticks, y_max=y_max,
        completed=sum(c for _, c, _ in buckets), failed=sum(f for _, _, f in buckets),
        completed_path=_path((b.x, b.completed_y, b.width, b.completed_h) for b in bars),
        failed_path=_path((b.x, b.failed_y, b.width, b.failed_h) for b in bars),
    )


def _clock(second_of_day: int) -> str:
    s = second_of_day % 86400
    return f"{s // 3600:02d}:{s % 3600 // 60:02d}"


def _path(rects: Iterable[tuple[float, float, float, float]]) -> str:
    """SVG path data drawing each (x, y, width, height) rectangle; empty ones skipped."""
    return " ".join(f"M{x:g} {y:g}h{w:g}v{h:g}h{-w:g}z" for x, y, w, h in rects if h > 0)
