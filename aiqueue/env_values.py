"""Numbers read from the environment, each refused with one line that names its variable.

A leaf: settings.py and the other settings readers import these, so a variable
is read and its error worded the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiqueue.errors import SettingsError


def env_int(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    """An integer >= `minimum`; unset or empty: `default`."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise SettingsError(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise SettingsError(f"{name} must be >= {minimum}, got {value}")
    return value


def env_float(
    env: Mapping[str, str], name: str, default: float, minimum: float,
    maximum: float = float("inf"),
) -> float:
    """A finite number between `minimum` and `maximum`; unset or empty: `default`."""
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise SettingsError(f"{name} must be a number, got {raw!r}") from None
    if not minimum <= value <= maximum or value == float("inf"):
        bound = f"between {minimum} and {maximum}" if maximum < float("inf") else f">= {minimum}"
        raise SettingsError(f"{name} must be a finite number {bound}, got {raw}")
    return value
