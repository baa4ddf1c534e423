"""The prompt cache against a model emulator with the providers' cache rules (docs/prompt-cache.md).

Scaled in time (a mark of 0.4 s and an entry life of 15 s; the second case at
half the scale, its 60 classes cut to 20): the assertions are counts, shares
and orders with the contract's bounds, never a duration.
"""

from __future__ import annotations

import asyncpg

from aiqueue.db.store import Store
from bench.cache_model import Scenario, measure


async def test_three_classes_at_once_read_their_prefix(store: Store, conn: asyncpg.Connection):
    f = await measure(store, conn, Scenario(classes=3, rows=30, cap=8, ttl=15.0))
    assert f.hit_rate >= 0.9 and f.min_class_hit_rate >= 0.9, f
    assert f.max_writes <= 1, f
    assert f.cost_share <= 0.6, f
    assert all(abs(share - 1 / 3) <= 0.05 for share in f.shares.values()), f


async def test_small_classes_at_in_flight_two_read_their_prefix(
        store: Store, conn: asyncpg.Connection):
    # Today's turns come back to a class every 10 marks (2 s), past the entry's life (1 s).
    f = await measure(store, conn, Scenario(classes=20, rows=4, cap=2, ttl=1.0, mark=0.2))
    assert f.hit_rate >= 0.8, f
    assert f.start_lag <= 3, f
