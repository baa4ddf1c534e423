"""Batches whose pool no longer declares a batch API (docs/overnight.md).

An operator may take `batch` out of a pool's table in aiqueue.toml, or remove the
pool, while some of its batches are still at the provider.  Those batches are
not forgotten: each step still polls them, applies their results or cancels
them at their fallback point, and deletes them at the provider, on the account
recorded with each batch when it was packed (where the API is, and the variable
that holds its key, read from the environment at start-up).  Nothing new is
packed for such a pool.

A batch whose account can't be reached any more (packed before accounts were
recorded, or its key variable is gone) can't be asked: its rows go live now,
without using an attempt, and the record ends `abandoned` (`batch_pool_removed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from aiqueue import logs
from aiqueue.batch.pack import LaneConfig
from aiqueue.batch.provider import ProviderName
from aiqueue.models.batch import OrphanAccount
from aiqueue.ports import OvernightStore
from aiqueue.runtime import Runtime

# How long an unreachable orphan's batches are taken while their rows go live.
_TAKE_SECONDS = 60.0


@dataclass(frozen=True)
class Account:
    """Where one pool's batches are kept: the provider, its API's URL and the key."""

    provider: ProviderName
    base_url: str
    key: str = field(repr=False)


async def lanes(rt: Runtime[OvernightStore], batch_pools: Sequence[str]
                ) -> list[tuple[LaneConfig, Account]]:
    """A lane (that only looks, never packs) for each account of open batches whose pool
    is not among `batch_pools`; the unreachable ones' rows go live here."""
    found: list[tuple[LaneConfig, Account]] = []
    for orphan in await rt.store.batch_orphans(batch_pools):
        account = _account(rt, orphan)
        if account is None:
            await _give_up(rt, orphan)
        else:
            found.append((_config(rt, orphan), account))
    return found


def _account(rt: Runtime[OvernightStore], orphan: OrphanAccount) -> Account | None:
    key = rt.settings.environment.get(orphan.key_env or "", "").strip()
    if not orphan.base_url or not key or orphan.provider not in ("openai", "anthropic"):
        return None
    provider: ProviderName = "openai" if orphan.provider == "openai" else "anthropic"
    return Account(provider, orphan.base_url, key)


def _config(rt: Runtime[OvernightStore], orphan: OrphanAccount) -> LaneConfig:
    s = rt.settings
    pool = s.queue.pools.get(orphan.pool)
    return LaneConfig(pool=orphan.pool, model=orphan.model, max_attempts=s.max_attempts,
                      slots=pool.max_in_flight if pool is not None else 1,
                      margin_seconds=s.batch_margin_seconds, money=s.money.json(),
                      attempts=s.queue.attempts, base_url=orphan.base_url,
                      key_env=orphan.key_env, packs=False)


async def _give_up(rt: Runtime[OvernightStore], orphan: OrphanAccount) -> None:
    """Rows of batches nobody can ask about any more go live; their records end."""
    moved = 0
    for batch in await rt.store.batches_due(orphan.pool, _TAKE_SECONDS):
        if batch.provider != orphan.provider:
            continue  # another account of the same pool: looked at on its own
        moved += await rt.store.batch_fallback(batch.id)
        await rt.store.batch_abandon_open(batch.id, "batch_pool_removed")
    logs.event("batch_lane_failed", pool=orphan.pool, code="batch_pool_removed",
               fell_back=moved)
