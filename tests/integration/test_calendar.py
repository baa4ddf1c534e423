"""A school's calendar: where days begin, for the usage report and daily caps."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, time, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import asyncpg
import httpx
import pytest

from aiqueue.settings import ModelPrice
from aiqueue.settings.money import Money, PoolMoney
from aiqueue.web.app import create_app
from tests.conftest import AUTH, add_submissions, app_client, make_settings

KIRITIMATI = "Pacific/Kiritimati"  # UTC+14: its date is tomorrow's for most of a UTC day


@pytest.fixture
async def client(db_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with app_client(create_app(make_settings(db_url, timezone=KIRITIMATI))) as c:
        yield c


async def test_todays_usage_is_on_the_local_date(client: httpx.AsyncClient,
                                                 conn: asyncpg.Connection, function: Any):
    ids = await add_submissions(conn, 1)
    r = await client.post("/api/marking/enqueue", headers=AUTH,
                          json={"assignment_id": "hw-1", "submission_ids": [str(ids[0])]})
    sent = json.loads(function.calls.last.request.content)
    item = {"queue_id": r.json()["queue_ids"][0], "token": sent["callback_token"],
            "status": "completed", "result": {"score": 1},
            "usage": {"model": "m", "prompt_tokens": 10, "completion_tokens": 5}}
    assert (await client.post("/webhooks/ai-mark", json=item)).json()["accepted"] == 1
    local_today = datetime.now(ZoneInfo(KIRITIMATI)).date().isoformat()
    report = (await client.get("/api/marking/usage?by=day", headers=AUTH)).json()
    assert [i["key"] for i in report["items"]] == [local_today]
    assert report["until"] == local_today
    only = await client.get(f"/api/marking/usage?since={local_today}&until={local_today}",
                            headers=AUTH)
    assert only.json()["total"]["jobs"] == 1


BERLIN = "Europe/Berlin"
# 29 March 2026: clocks go from 02:00 CET to 03:00 CEST; that day is 23 hours long.
DAY_STARTS = datetime(2026, 3, 28, 23, 0, tzinfo=UTC)   # 00:00 CET
DAY_ENDS = datetime(2026, 3, 29, 22, 0, tzinfo=UTC)     # 00:00 CEST, 23 h later


def berlin_money(cap: float) -> Money:
    pool = PoolMoney(caps={"group_usd_per_day": cap}, prices={"m": ModelPrice(1.0, 1.0)},
                     timezone=BERLIN)
    return Money({"default": pool})


async def test_a_daily_cap_resets_at_local_midnight_across_a_daylight_saving_change(
        conn: asyncpg.Connection):
    spec = json.dumps(json.loads(berlin_money(1.0).json() or "{}")["default"])

    async def window(at: datetime) -> tuple[datetime, datetime]:
        row = await conn.fetchrow("SELECT * FROM aiqueue_spend_window($1::jsonb, 'day', $2)",
                                  spec, at)
        return row["starts_at"], row["ends_at"]

    async def spent_in_window(at: datetime) -> float:
        start, _ = await window(at)
        value = await conn.fetchval(
            "SELECT usd FROM ai_marking_spend WHERE pool = 'default' AND group_key = 'g' "
            "AND span = 'day' AND starts_at = $1", start)
        return float(value or 0)

    # The injected clock: moments either side of the change and of local midnight.
    assert await window(DAY_STARTS + timedelta(hours=1)) == (DAY_STARTS, DAY_ENDS)
    assert await window(DAY_ENDS - timedelta(minutes=1)) == (DAY_STARTS, DAY_ENDS)
    assert (await window(DAY_ENDS))[0] == DAY_ENDS
    # A UTC day would have ended an hour before local midnight.
    for at, usd in ((DAY_STARTS + timedelta(hours=2), 0.6),   # 01:00 CET
                    (DAY_ENDS - timedelta(minutes=30), 0.5),  # 23:30 CEST (21:30 UTC)
                    (DAY_ENDS + timedelta(minutes=30), 0.2)):  # 00:30 the next local day
        await conn.execute("SELECT aiqueue_spend_add($1::jsonb, 'default', 'g', $2, $3)",
                           spec, usd, at)
    assert await spent_in_window(DAY_ENDS - timedelta(minutes=1)) == pytest.approx(1.1)
    # The cap ($1) was reached that day; the next local day starts from the new spend.
    assert await spent_in_window(DAY_ENDS + timedelta(hours=1)) == pytest.approx(0.2)


def test_a_bad_zone_stops_start_up_naming_the_variable():
    from aiqueue.errors import SettingsError
    from aiqueue.settings import load_settings

    base = {"DATABASE_URL": "postgresql://x/y", "MARKING_QUEUE_SECRET": "s" * 32}
    with pytest.raises(SettingsError, match="QUEUE_TIMEZONE"):
        load_settings({**base, "QUEUE_TIMEZONE": "Mars/Olympus_Mons"})
    assert load_settings({**base, "QUEUE_TIMEZONE": KIRITIMATI}).timezone == KIRITIMATI
    assert load_settings(base).timezone == "UTC"


async def test_a_group_at_its_daily_cap_resumes_at_the_pools_local_midnight(
        conn: asyncpg.Connection):
    pool = PoolMoney(caps={"group_usd_per_day": 1.0}, prices={"m": ModelPrice(1.0, 1.0)},
                     timezone=KIRITIMATI)
    spec = json.dumps(json.loads(Money({"default": pool}).json() or "{}")["default"])
    await conn.execute("SELECT aiqueue_spend_add($1::jsonb, 'default', 'g', 1.5, now())", spec)
    stop = await conn.fetchrow("SELECT * FROM aiqueue_spend_stop($1::jsonb, 'default', 'g')",
                               spec)
    zone = ZoneInfo(KIRITIMATI)
    tomorrow = datetime.now(zone).date() + timedelta(days=1)
    assert stop["cap"] == "group_usd_per_day"
    assert stop["until"] == datetime.combine(tomorrow, time(), zone)
