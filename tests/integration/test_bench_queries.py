"""The bench's database measurements still run against the current schema (tiny scale)."""

from __future__ import annotations

import pytest

from bench import db

# The benchmarks' measurements VACUUM ANALYZE: a database of its own each.
pytestmark = pytest.mark.fresh_db


async def test_claim_and_page_measurements_run_on_a_small_queue(db_url: str):
    await db.seed_queue(db_url, 200, "pending", groups=5)
    server, wall = await db.claim_at_scale(db_url, 1)
    assert len(server) == len(wall) == 1 and server[0] > 0


async def test_stats_and_page_measurements_run_on_a_small_queue(db_url: str):
    await db.seed_queue(db_url, 200, "completed", groups=5)
    ours, plain = await db.stats_and_page_at_scale(db_url, 1)
    assert len(ours) == len(plain) == 1 and ours[0] > 0


async def test_enqueue_breakdown_finds_its_triggers_in_the_plan(db_url: str):
    parts = await db.enqueue_breakdown(db_url, 50)
    assert set(parts) == {"explained", "fk", "feed", "statement", "same_rows", "bare"}
    assert all(v > 0 for v in parts.values()), parts
    assert parts["fk"] < parts["explained"]


async def test_settle_figures_name_the_settle_and_its_functions(db_url: str, monkeypatch):
    from bench import settle

    async def here(name: str) -> str:
        return db_url
    monkeypatch.setattr(settle, "fresh_database", here)
    run = await settle.run_settles("unused", {}, settles=5)
    assert run.server_ms > 0 and run.wall_ms >= run.server_ms * 0.5
    # Each settle applies a result and claims the next: both sides are in its functions.
    assert run.calls["aiqueue_settle"] == 1
    assert run.calls["aiqueue_complete"] == 1 and run.calls["aiqueue_claim"] == 1
    assert "aiqueue_claim" in settle.report(run)


async def test_money_figures_run_on_a_small_scale(db_url: str, monkeypatch):
    from bench import money

    async def here(name: str) -> str:
        return db_url
    monkeypatch.setattr(money, "fresh_database", here)
    share = await money.token_share(True, "unused")
    assert 0.4 < share < 0.6


async def test_the_scale_bench_runs_small(pg_admin: str, monkeypatch):
    """`python -m bench --only scale` at 2,000 ended rows: the build (month partitions from
    13 months back), every figure, the removal of the oldest month on a copy."""
    from aiqueue.db.embedded import recreate_database
    from bench import scale
    from bench.common import Table
    from tests import pg

    monkeypatch.setattr(scale, "admin_dsn", lambda: pg_admin)
    prefix = pg.next_name()
    rows = Table()
    try:
        await scale.scale_rows(rows, 1, 2000, prefix=prefix)
        # Built once, then reused.
        await scale.scale_database(2000, 200, prefix)
    finally:
        await recreate_database(pg_admin, f"{prefix}_2000", create=False)
    figures = {name: samples for name, _, samples, _, _ in rows}
    assert any(name.startswith("claim,") for name in figures)
    assert figures["erase one submission"] and all(v > 0 for v in figures["erase one submission"])
    dropped = next(v for name, v in figures.items() if name.startswith("drop the oldest month"))
    assert dropped[0] > 0
    # The oldest month held a tenth of the ended rows, each with its attempt and result:
    # its record rows' month goes in the same pass (aiqueue 0078).  The build's first row
    # was created 40 s before the oldest month began (in the default), so 199 of them.
    assert "(199 record rows, 200 attempts + results)" in " ".join(figures)
    # The upgrade from unpartitioned tables of 2,000 rows each kept every row (it asserts).
    assert any(name.startswith("upgrade to month partitions, 2,000 rows") for name in figures)
