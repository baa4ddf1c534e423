"""A school's calendar (docs/fallback-budgets-calendar.md): where its days begin.

QUEUE_TIMEZONE (an IANA name, default UTC) sets the day of the daily spend
caps, the usage report, the charts and the pages' times; a pool's `timezone`
in aiqueue.toml overrides it for that pool's daily caps.  Hourly windows stay
clock hours.  Zones come from the standard library's zoneinfo, with the
`tzdata` package where the system has no zone files.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, tzinfo
from functools import cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiqueue.errors import SettingsError

UTC_NAME = "UTC"


def check_zone(value: object, where: str) -> str:
    """`value` as an IANA zone name zoneinfo knows, else SettingsError naming `where`."""
    if not isinstance(value, str) or not value.strip():
        raise SettingsError(f"{where} must be an IANA time zone name, e.g. Europe/Berlin")
    name = value.strip()
    try:
        zone(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise SettingsError(f"{where} = {name[:60]!r} is not a time zone this system knows "
                            "(an IANA name, e.g. Europe/Berlin)") from None
    return name


def env_timezone(env: Mapping[str, str], name: str) -> str:
    """An IANA time zone name known to Python and the database, e.g. Europe/Berlin (default
    UTC)."""
    raw = env.get(name, "").strip()
    return check_zone(raw, name) if raw else UTC_NAME


@cache
def zone(name: str) -> tzinfo:
    """The zone called `name` (cached: zoneinfo reads its file once)."""
    return ZoneInfo(name)


def local(at: datetime, name: str) -> datetime:
    """`at` as the wall-clock time where `name` is."""
    return at.astimezone(zone(name))
