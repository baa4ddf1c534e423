"""A pool's provider prompt cache (docs/prompt-cache.md): `[pools.<name>.prompt_cache]`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from aiqueue.errors import SettingsError
from aiqueue.settings.toml_values import check_keys, whole

KEYS = frozenset({"ttl_seconds", "min_tokens", "write", "read", "key_rpm", "fair_quantum"})


@dataclass(frozen=True)
class PromptCache:
    """How long the provider keeps an unused prefix, the shortest it caches, what a cache
    write and read cost (multiples of the input price), the key's rate before it is sharded,
    and the quantum of locality within fair turns (weighted tokens; None: 4 × a mean row)."""

    ttl_seconds: float = 300.0
    min_tokens: int = 1024
    write: float = 1.0
    read: float = 0.10
    key_rpm: int | None = None
    fair_quantum: float | None = None

    @property
    def on(self) -> bool:
        """Whether the claim schedules for the cache (ttl_seconds 0: as before)."""
        return self.ttl_seconds > 0

    def plan(self) -> dict[str, Any] | None:
        """The pool's `cache` in the claim plan (db/sql/functions/45_cache.sql)."""
        if not self.on:
            return None
        return {"ttl": self.ttl_seconds, "min": self.min_tokens, "quantum": self.fair_quantum,
                "key_rpm": self.key_rpm}

    def billed(self, prompt: float, reads: float, writes: float) -> float:
        """Input tokens as billed: uncached × 1 + writes × write + reads × read."""
        return max(prompt - reads - writes, 0.0) + writes * self.write + reads * self.read


def _factor(where: str, value: object) -> float:
    if (not isinstance(value, (int, float)) or isinstance(value, bool)
            or not math.isfinite(value) or value < 0):
        raise SettingsError(f"{where} must be a number >= 0 (a multiple of the input price), "
                            f"got {value!r}")
    return float(value)


def load(where: str, body: object) -> PromptCache:
    """A `[pools.<name>.prompt_cache]` table, each key checked with an error naming it."""
    if not isinstance(body, dict):
        raise SettingsError(f"{where} must be a table")
    check_keys(where, body, KEYS)
    found: dict[str, Any] = {}
    if "ttl_seconds" in body:
        found["ttl_seconds"] = float(whole(f"{where}.ttl_seconds", body["ttl_seconds"], 0))
    if "min_tokens" in body:
        found["min_tokens"] = whole(f"{where}.min_tokens", body["min_tokens"], 0)
    for key in ("write", "read"):
        if key in body:
            found[key] = _factor(f"{where}.{key}", body[key])
    if "key_rpm" in body:
        found["key_rpm"] = whole(f"{where}.key_rpm", body["key_rpm"], 1)
    if "fair_quantum" in body:
        quantum = body["fair_quantum"]
        if (not isinstance(quantum, (int, float)) or isinstance(quantum, bool)
                or not math.isfinite(quantum) or quantum <= 0):
            raise SettingsError(f"{where}.fair_quantum must be a number of weighted tokens > 0, "
                                f"got {quantum!r}")
        found["fair_quantum"] = float(quantum)
    return PromptCache(**found)
