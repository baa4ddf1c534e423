"""The cost card's hourly sums (96_usage_hours.sql): the card reads closed hours from
ai_marking_usage_hours and the rest from the results, and always adds up to what
the usage report sums from the results themselves (docs/performance.md)."""

from __future__ import annotations

import dataclasses
import random
from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg
import pytest

from aiqueue.db.store import Store
from aiqueue.models import UsageCard, UsageRow
from aiqueue.reads.usage import usage_range
from aiqueue.settings.calendar import local
from tests.conftest import add_submissions

KEPT = 365 * 86400.0
ZONES = ("UTC", "Asia/Kolkata", "America/St_Johns", "Asia/Kathmandu")


async def seed(conn: asyncpg.Connection, n: int = 240) -> list[tuple[UUID, datetime]]:
    """`n` results over the last 35 days (today's hours too): two models and none, both
    lanes, some unpriced, some with the prompt cache's counts."""
    rng = random.Random(7)
    subs = await add_submissions(conn, n)
    now = datetime.now(UTC)
    rows = []
    for k, sub in enumerate(subs):
        at = now - timedelta(minutes=rng.randrange(0, 35 * 24 * 60))
        if k < 12:  # the last hours, summed live until they close
            at = now - timedelta(minutes=rng.randrange(0, 120))
        cached = k % 5 == 0
        rows.append((sub, at, rng.choice(["model-a", "model-b", None]),
                     "batch" if k % 7 == 0 else "live", rng.randrange(1, 900),
                     rng.randrange(1, 200), None if k % 11 == 0 else rng.randrange(1, 999) / 1e4,
                     rng.randrange(1, 500) if cached else None, 3 if cached else None,
                     rng.randrange(1, 400) if cached else None,
                     rng.randrange(1, 99) / 1e5 if cached else None))
    await conn.executemany(
        "INSERT INTO ai_marking_results (queue_id, submission_id, assignment_id, run_id,"
        " applied_at, result, model, lane, prompt_tokens, completion_tokens, cost_usd,"
        " cache_read_tokens, cache_write_tokens, cache_saved_tokens, cache_saved_usd)"
        " VALUES (gen_random_uuid(), $1, 'hw-1', gen_random_uuid(), $2, '{\"score\": 1}',"
        " $3, $4, $5, $6, $7, $8, $9, $10, $11)", rows)
    return [(r[0], r[1]) for r in rows]


def figures(row: UsageRow) -> tuple[object, ...]:
    """A usage line without processing times (the card shows none), costs to 9 places."""
    out = dataclasses.replace(row, avg_seconds=None, p95_seconds=None,
                              cost_usd=None if row.cost_usd is None else round(row.cost_usd, 9),
                              cache_saved_usd=None if row.cache_saved_usd is None
                              else round(row.cache_saved_usd, 9))
    return dataclasses.astuple(out)


async def card_and_report(store: Store, tz: str, kept: float = KEPT
                          ) -> tuple[UsageCard, UsageCard]:
    """The card as /ai-queue reads it, and the same figures from the usage report."""
    today = local(datetime.now(UTC), tz).date()
    start, end = usage_range(None, None, today, tz)
    day_start, _ = usage_range(today.isoformat(), None, today, tz)
    card = await store.usage_card(start, day_start, end, kept)
    by_model = await store.usage_report(start, end, "model", tz)
    by_lane = await store.usage_report(start, end, "lane", tz)
    day = await store.usage_report(day_start, end, "model", tz)
    report = UsageCard(day[-1], by_model[-1], by_model[:-1], by_lane[:-1])
    return card, report


async def assert_same(store: Store, kept: float = KEPT) -> None:
    for tz in ZONES:
        card, report = await card_and_report(store, tz, kept)
        for part in ("today", "month"):
            assert figures(getattr(card, part)) == figures(getattr(report, part)), (tz, part)
        for part in ("by_model", "by_lane"):
            assert [figures(r) for r in getattr(card, part)] == \
                [figures(r) for r in getattr(report, part)], (tz, part)


async def roll(conn: asyncpg.Connection, kept: float = KEPT) -> int:
    return int(await conn.fetchval("SELECT aiqueue_usage_roll($1, 10000)", kept))


async def test_the_card_adds_up_to_the_report_before_and_after_the_hours_are_summed(
    store: Store, conn: asyncpg.Connection
):
    await seed(conn)
    await assert_same(store)
    summed = await roll(conn)
    # every closed hour of the last 32 days, and nothing newer
    assert 32 * 24 - 2 <= summed <= 32 * 24
    assert await conn.fetchval("SELECT max(hour) + interval '1 hour' <= now() - interval "
                               "'15 minutes' FROM ai_marking_usage_hours")
    assert await roll(conn) == 0
    await assert_same(store)


async def test_the_card_reads_the_summed_hours(store: Store, conn: asyncpg.Connection):
    await seed(conn)
    await roll(conn)
    before, _ = await card_and_report(store, "UTC")
    # A change the sums don't know of (none of the app's: a summed hour's results
    # only leave) shows that the card took those hours from them.
    await conn.execute("UPDATE ai_marking_results SET prompt_tokens = prompt_tokens + 1000"
                       " WHERE applied_at < now() - interval '3 days'")
    after, report = await card_and_report(store, "UTC")
    assert after.month.prompt_tokens == before.month.prompt_tokens
    assert report.month.prompt_tokens > before.month.prompt_tokens


async def test_an_erasure_reopens_the_hours_of_its_results(store: Store, conn: asyncpg.Connection):
    seeded = await seed(conn)
    await roll(conn)
    old = [sub for sub, at in seeded if at < datetime.now(UTC) - timedelta(days=2)][:3]
    hours = await conn.fetchval("SELECT count(*) FROM ai_marking_usage_hours WHERE lane IS NULL")
    counts = await store.erase(old, "cli")
    assert counts["ai_marking_results"] == 3
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_usage_hours"
                               " WHERE lane IS NULL") < hours
    await assert_same(store)
    await roll(conn)
    await assert_same(store)


@pytest.mark.parametrize("days", [5.0, 0.5])
async def test_hours_past_the_keep_period_are_read_from_what_retention_left(
    store: Store, conn: asyncpg.Connection, days: float
):
    await seed(conn)
    await roll(conn)
    # Retention deletes results older than its period (sql/records.sql retain)
    # without touching the sums; the card leaves those hours to the results.
    await conn.execute("DELETE FROM ai_marking_results WHERE applied_at < now() - $1::interval",
                       timedelta(days=days))
    await assert_same(store, days * 86400)
    await roll(conn, days * 86400)
    assert await conn.fetchval("SELECT min(hour) >= now() - $1::interval"
                               " FROM ai_marking_usage_hours", timedelta(days=days))
    await assert_same(store, days * 86400)


async def test_the_housekeeping_pass_sums_the_hours(store: Store, conn: asyncpg.Connection):
    await seed(conn, 30)
    await store.keep_partitions(KEPT, every_seconds=0)
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_usage_hours"
                               " WHERE lane IS NULL") == 48  # two days a pass
    await assert_same(store)
