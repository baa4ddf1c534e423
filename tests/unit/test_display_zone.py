"""The pages show times where the school is (QUEUE_TIMEZONE, docs/fallback-budgets-calendar.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from aiqueue.web.chart import chart
from aiqueue.web.views.text import DISPLAY_ZONE, fmt_time

AT = datetime(2026, 7, 1, 12, 0, 5, tzinfo=UTC)


def test_times_are_shown_in_the_schools_zone():
    assert fmt_time(AT) == "2026-07-01 12:00:05 UTC"
    token = DISPLAY_ZONE.set("Europe/Berlin")
    try:
        assert fmt_time(AT) == "2026-07-01 14:00:05 CEST"
        assert fmt_time(datetime(2026, 1, 1, 12, tzinfo=UTC)) == "2026-01-01 13:00:00 CET"
        drawn = chart([(AT.replace(second=0), 3, 1)])
        assert drawn.bars[0].title.startswith("14:00–14:05 CEST")
    finally:
        DISPLAY_ZONE.reset(token)
