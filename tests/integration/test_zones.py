"""Time zones the database must know too (QUEUE_TIMEZONE, a pool's `timezone`), and
"today" on /ai-queue and in the stats as the school's day (docs/configuration.md)."""

from __future__ import annotations

import json
import logging
import zoneinfo
from datetime import UTC, datetime, timedelta
from uuid import UUID

import asyncpg
import pytest

from aiqueue.cli import refuse_unknown_zone
from aiqueue.doctor.checks import check_timezone
from aiqueue.doctor.report import Doctor
from aiqueue.errors import ZoneUnknown
from aiqueue.runtime import Runtime
from aiqueue.settings import Settings
from aiqueue.settings.kinds import Pool, QueueConfig
from aiqueue.web.app import create_app
from tests.conftest import AUTH, SECRET, add_submissions, app_client, make_settings

KIRITIMATI = "Pacific/Kiritimati"  # UTC+14
# Noon UTC on 10 March: 02:00 on 11 March in Kiritimati, whose day began at 10:00 UTC.
AT = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


async def python_only_zone(conn: asyncpg.Connection) -> str:
    """A zone Python's data has and this PostgreSQL's lacks (a newer tzdata), else a name
    neither knows (the check is the database's either way)."""
    known = {r["name"] for r in await conn.fetch("SELECT name FROM pg_timezone_names")}
    newer = sorted(zoneinfo.available_timezones() - known - {"localtime", "Factory"})
    return newer[0] if newer else "Mars/Olympus_Mons"


def with_pool_zone(settings: Settings, zone: str) -> Settings:
    """A second pool, `night`, whose days begin in `zone`."""
    night = Pool(name="night", max_in_flight=1, timezone=zone)
    return settings.with_overrides(queue_file=QueueConfig(pools={"night": night}, kinds={}))


async def test_today_is_the_schools_day(db_url: str, conn: asyncpg.Connection):
    ids = await add_submissions(conn, 3, "hw-z")
    settings = make_settings(db_url, timezone=KIRITIMATI, max_in_flight=0)
    await conn.execute("UPDATE ai_queue_control SET paused = true")  # the rows stay pending
    async with app_client(create_app(settings, clock=lambda: AT)) as client:
        r = await client.post("/api/marking/enqueue", headers=AUTH, json={
            "assignment_id": "hw-z", "submission_ids": [str(i) for i in ids]})
        queue_ids = [UUID(q) for q in r.json()["queue_ids"]]
        for q in queue_ids:
            failed = await client.post(f"/api/marking/rows/{q}/fail", headers=AUTH,
                                       json={"note": "test"})
            assert failed.status_code == 200, failed.text
        # Failed at 05:00 UTC (UTC's today, Kiritimati's yesterday), at 11:00 UTC (both
        # days' today) and the day before (neither).
        for q, at in zip(queue_ids, (AT - timedelta(hours=7), AT - timedelta(hours=1),
                                     AT - timedelta(days=1)), strict=True):
            await conn.execute("UPDATE ai_marking_queue SET finished_at = $2 "
                               "WHERE queue_id = $1", q, at)
        stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
        assert stats["failed_today"] == 1
        r = await client.post("/ai-queue/login", data={"password": SECRET, "next": "/ai-queue"})
        page = (await client.get("/ai-queue")).text
        assert f"Failed today ({KIRITIMATI})" in page
        assert '<span class="value" data-stat="failed_today">1</span>' in page
    async with app_client(create_app(make_settings(db_url), clock=lambda: AT)) as client:
        stats = (await client.get("/api/marking/stats", headers=AUTH)).json()
        assert stats["failed_today"] == 2  # UTC's day


async def test_a_zone_the_database_lacks_is_refused_with_one_line(
        db_url: str, conn: asyncpg.Connection, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.INFO, logger="aiqueue")
    zone = await python_only_zone(conn)
    ids = await add_submissions(conn, 1, "hw-z")
    async with app_client(create_app(make_settings(db_url, timezone=zone))) as client:
        for _ in range(2):
            r = await client.post("/api/marking/enqueue", headers=AUTH, json={
                "assignment_id": "hw-z", "submission_ids": [str(ids[0])]})
            assert r.status_code == 503, r.text
            body = r.json()
            assert body["error"] == "timezone_unknown" and body["setting"] == "QUEUE_TIMEZONE"
            assert zone in body["detail"] and "\n" not in body["detail"]
        assert (await client.get("/api/marking/stats", headers=AUTH)).status_code == 503
    assert await conn.fetchval("SELECT count(*) FROM ai_marking_queue") == 0
    logged = [json.loads(r.getMessage()) for r in caplog.records if r.name == "aiqueue"]
    assert [e["check"] for e in logged if e.get("event") == "timezone_unknown"] == [
        "QUEUE_TIMEZONE"]
    # Start-up (`serve`) refuses it with the same line.
    with pytest.raises(ZoneUnknown) as refused:
        await refuse_unknown_zone(make_settings(db_url, timezone=zone))
    assert refused.value.setting == "QUEUE_TIMEZONE"
    await refuse_unknown_zone(make_settings(db_url, timezone=KIRITIMATI))


async def test_the_doctor_names_the_setting(db_url: str, conn: asyncpg.Connection):
    zone = await python_only_zone(conn)
    cases = {
        "QUEUE_TIMEZONE": make_settings(db_url, timezone=zone),
        "pools.night.timezone": with_pool_zone(make_settings(db_url, timezone=KIRITIMATI),
                                                 zone),
    }
    for setting, settings in cases.items():
        rt = await Runtime.create(settings, db_url)
        try:
            doc = Doctor(settings, rt, 1.0)
            await check_timezone(doc)
        finally:
            await rt.close()
        [line] = doc.report.checks
        assert (line.name, line.status) == ("timezone", "fail")
        assert line.detail.startswith(f"{setting} = {zone!r}") and line.fix
    good = with_pool_zone(make_settings(db_url, timezone=KIRITIMATI), "Europe/Berlin")
    rt = await Runtime.create(good, db_url)
    try:
        doc = Doctor(good, rt, 1.0)
        await check_timezone(doc)
    finally:
        await rt.close()
    [line] = doc.report.checks
    assert line.status == "pass" and "Europe/Berlin" in line.detail
