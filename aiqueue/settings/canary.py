"""A kind's drift canary (docs/canaries.md): `[kinds.<kind>.canary]` in aiqueue.toml.

A canary re-marks teacher-reviewed results of the kind and compares its
agreement with the last passing canary's; the rules are in queue/canary.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

from aiqueue.errors import SettingsError
from aiqueue.settings.toml_values import check_keys, whole

KEYS = frozenset({"rows", "every_seconds", "max_drop", "lane", "max_share"})
CanaryLane = Literal["live", "batch"]


@dataclass(frozen=True)
class Canary:
    """How many reviewed results a canary re-marks, how often, the drop that opens a drift,
    its lane (None: batch when the kind's pool has a batch API, else live) and the most of
    the kind's 30-day spend canaries may take."""

    rows: int = 20
    every_seconds: float = 86400.0
    max_drop: float = 0.1
    lane: CanaryLane | None = None
    max_share: float = 0.02

    def lane_for(self, pool_has_batch: bool) -> CanaryLane:
        """The lane its runs take."""
        return self.lane or ("batch" if pool_has_batch else "live")


def _share(where: str, value: object) -> float:
    if (not isinstance(value, (int, float)) or isinstance(value, bool)
            or not math.isfinite(value) or not 0 <= value <= 1):
        raise SettingsError(f"{where} must be a number from 0 to 1, got {value!r}")
    return float(value)


def load(where: str, body: object) -> Canary:
    """A `[kinds.<kind>.canary]` table, each key checked with an error naming it."""
    if not isinstance(body, dict):
        raise SettingsError(f"{where} must be a table")
    check_keys(where, body, KEYS)
    found: dict[str, Any] = {}
    if "rows" in body:
        found["rows"] = whole(f"{where}.rows", body["rows"], 1)
        if found["rows"] > 200:
            raise SettingsError(f"{where}.rows must be at most 200, got {found['rows']}")
    if "every_seconds" in body:
        every = body["every_seconds"]
        if (not isinstance(every, (int, float)) or isinstance(every, bool)
                or not math.isfinite(every) or every < 1):
            raise SettingsError(f"{where}.every_seconds must be a number of seconds >= 1, "
                                f"got {every!r}")
        found["every_seconds"] = float(every)
    for key in ("max_drop", "max_share"):
        if key in body:
            found[key] = _share(f"{where}.{key}", body[key])
    if "lane" in body:
        lane = body["lane"]
        if lane not in ("live", "batch"):
            raise SettingsError(f"{where}.lane must be \"live\" or \"batch\", got {lane!r}")
        found["lane"] = lane
    return Canary(**found)
