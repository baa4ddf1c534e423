"""Budget warnings: at 80 % and 95 % of each spend cap, once per window."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from aiqueue.db.store import Store
from aiqueue.settings import ModelPrice
from aiqueue.settings.money import Money, PoolMoney
from tests.integration.money_kit import Model

KEYS = {"type", "cap", "pool", "group", "threshold", "spent_usd", "limit_usd", "window_ends_at"}


def capped(**caps: float) -> Money:
    pool = PoolMoney(caps=caps, prices={"m": ModelPrice(1.0, 1.0)})
    return Money({"default": pool}, hour_seconds=3600, day_seconds=86400)


async def warnings(conn: asyncpg.Connection) -> list[dict[str, Any]]:
    rows = await conn.fetch("SELECT body::text AS body FROM ai_marking_outbox "
                            "WHERE type = 'marking.budget_warning' ORDER BY created_at, id")
    return [json.loads(r["body"]) for r in rows]


@pytest.fixture
def model(store: Store, conn: asyncpg.Connection) -> Model:
    return Model(store, conn)


async def test_a_half_dollar_hourly_cap_warns_at_80_and_95_percent_once_each(
        model: Model, store: Store, conn: asyncpg.Connection):
    model.money = capped(group_usd_per_hour=0.5)
    model.usd_per_token = {"teacher": 0.1 / 1000}  # each row costs $0.10
    await model.enqueue("teacher", 8, 1000)
    thresholds = []
    for _ in range(8):
        await model.fill(1)
        if not model.in_flight:
            break  # the cap paused the group
        await model.finish_one()
        sent = await store.budget_warnings(model.money.json())
        thresholds.append([t for *_, t in sent])
    # $0.10 .. $0.30: nothing; $0.40 passes 80 %; $0.50 passes 95 %; then it waits.
    assert thresholds == [[], [], [], [0.8], [0.95]]
    assert await store.budget_warnings(model.money.json()) == []
    first, second = await warnings(conn)
    assert set(first) == KEYS
    assert first["cap"] == "group_usd_per_hour" and first["group"] == "teacher"
    assert first["pool"] == "default" and first["threshold"] == 0.8
    assert first["spent_usd"] == pytest.approx(0.4) and first["limit_usd"] == 0.5
    ends = datetime.fromisoformat(first["window_ends_at"])
    assert ends.minute == 0 and ends.second == 0 and ends > datetime.now(UTC)
    assert second["threshold"] == 0.95 and second["spent_usd"] == pytest.approx(0.5)


async def test_each_window_warns_again_and_a_pools_cap_names_no_group(
        store: Store, conn: asyncpg.Connection):
    money = capped(group_usd_per_hour=0.5, pool_usd_per_day=10.0)
    spec = json.dumps(json.loads(money.json() or "{}")["default"])
    later = datetime.now(UTC) + timedelta(hours=1)

    async def spend(usd: float, at: datetime) -> None:
        await conn.execute("SELECT aiqueue_spend_add($1::jsonb, 'default', 'g', $2, $3)",
                           spec, usd, at)

    await spend(0.45, datetime.now(UTC))
    assert [t for *_, t in await store.budget_warnings(money.json())] == [0.8]
    await spend(0.45, later)  # the next hour: its own window
    assert await store.budget_warnings(money.json()) == []  # not there yet
    assert [t for *_, t in await store.budget_warnings(money.json(), later)] == [0.8]
    await spend(8.0, later)  # the pool's day: $8.90 of $10
    sent = await store.budget_warnings(money.json(), later)
    assert sorted(sent) == [("group_usd_per_hour", "default", "g", 0.95),
                            ("pool_usd_per_day", "default", "", 0.8)]
    pool = [w for w in await warnings(conn) if w["cap"] == "pool_usd_per_day"]
    assert len(pool) == 1 and pool[0]["group"] is None
    near = await store.budget_near(money.json())
    assert {(n.cap, n.group) for n in near} >= {("group_usd_per_hour", "g")}
