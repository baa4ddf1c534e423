"""Every environment variable the settings table reads, and aiqueue.toml's keys.

What the configuration reference is generated from: each table field's
variable, default and check (`number`, `optional`, `entry` in env.py), and
the keys a `[pools.<name>]` or `[kinds.<name>]` table may set.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import MISSING, dataclass, fields

from aiqueue.settings import canary, prompt_cache
from aiqueue.settings.table import Settings
from aiqueue.settings.toml_load import KIND_KEYS, POOL_KEYS


@dataclass(frozen=True)
class EnvField:
    """One variable of the settings table."""

    name: str  # the environment variable, e.g. QUEUE_MAX_ATTEMPTS
    field: str  # the Settings field it fills, e.g. max_attempts
    default: object  # the value when it is unset or blank (None: unset means none)
    check: str  # what a value must be, in words


def env_fields() -> Iterator[EnvField]:
    """The table's variables, in the table's order."""
    for f in fields(Settings):
        if "env" in f.metadata:
            default = f.default if f.default is not MISSING else (
                f.default_factory() if f.default_factory is not MISSING else None)
            yield EnvField(f.metadata["env"], f.name, default, f.metadata["check"])


def toml_keys() -> dict[str, tuple[str, ...]]:
    """The keys each aiqueue.toml table may set: {"pools": (...), "kinds": (...),
    "pools.prompt_cache": (...), "kinds.canary": (...)} (a pool's
    `[pools.<name>.prompt_cache]`, a kind's `[kinds.<name>.canary]`)."""
    return {"pools": tuple(sorted(POOL_KEYS)), "kinds": tuple(sorted(KIND_KEYS)),
            "pools.prompt_cache": tuple(sorted(prompt_cache.KEYS)),
            "kinds.canary": tuple(sorted(canary.KEYS))}
