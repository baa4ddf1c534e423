"""The retry rule of bounded database calls (db/calls.py) and DATABASE_POOL_MAX, without I/O.

The behaviour against a real server, through a fault proxy, is in
tests/integration/test_db_faults.py; here a fake connection fails at chosen
moments so that each branch of "is a second attempt safe?" is pinned down.
"""

from __future__ import annotations

from typing import Any

import pytest

from aiqueue.db.calls import Database
from aiqueue.db.pool import Limits
from aiqueue.errors import DatabaseTimeout, SettingsError, StoreError
from aiqueue.settings import load_settings

SECRET = "test-secret-0123456789abcdef"


class FakeConn:
    """Answers every statement, except that it breaks at `fail_on` (once)."""

    def __init__(self, fail_on: str | None) -> None:
        self.fail_on = fail_on
        self.sent: list[str] = []
        self.closed = False

    async def execute(self, sql: str) -> str:
        self.sent.append(sql.split(";")[0])
        if self.fail_on and sql.startswith(self.fail_on):
            raise ConnectionResetError("peer went away")
        return "OK"

    def is_closed(self) -> bool:
        return self.closed

    def is_in_transaction(self) -> bool:
        return False

    def terminate(self) -> None:
        self.closed = True


class FakePool:
    """Hands out connections that fail as scripted, first to last."""

    def __init__(self, *fail_on: str | None) -> None:
        self.limits = Limits()
        self.script = list(fail_on)
        self.handed: list[FakeConn] = []
        self.discards = 0

    async def acquire(self) -> FakeConn:
        conn = FakeConn(self.script.pop(0) if self.script else None)
        self.handed.append(conn)
        return conn

    def release(self, conn: FakeConn, *, reusable: bool) -> None:
        if not reusable:
            conn.terminate()

    def discard_idle(self) -> None:
        self.discards += 1


def _db(pool: FakePool) -> Database:
    return Database(pool)  # type: ignore[arg-type]  # the fake has the pool's interface


async def _work(conn: Any) -> str:
    await conn.execute("SELECT the work")
    return "done"


async def test_a_write_that_broke_before_commit_runs_again_on_a_fresh_connection() -> None:
    pool = FakePool("SELECT the work")
    assert await _db(pool).write(_work) == "done"
    first, second = pool.handed
    assert first.closed and "COMMIT" not in first.sent
    assert second.sent == ["BEGIN", "SELECT the work", "COMMIT"]
    assert pool.discards == 1  # its idle siblings are not trusted either


async def test_a_write_that_broke_during_commit_is_not_repeated_unless_idempotent() -> None:
    pool = FakePool("COMMIT")
    with pytest.raises(StoreError) as caught:
        await _db(pool).write(_work)
    assert caught.value.status_code == 503 and caught.value.retry_after
    assert len(pool.handed) == 1
    pool = FakePool("COMMIT")
    assert await _db(pool).write(_work, idempotent=True) == "done"
    assert len(pool.handed) == 2


async def test_a_read_is_retried_once_and_then_gives_up() -> None:
    pool = FakePool("SELECT the work")
    assert await _db(pool).read(_work) == "done"
    pool = FakePool("SELECT the work", "SELECT the work", None)
    with pytest.raises(StoreError):
        await _db(pool).read(_work)
    assert len(pool.handed) == 2


async def test_a_call_past_its_deadline_is_a_timeout_error() -> None:
    import asyncio

    pool = FakePool()
    pool.limits = Limits(hot=0.05)

    async def slow(conn: Any) -> None:
        await asyncio.sleep(1)

    with pytest.raises(DatabaseTimeout):
        await _db(pool).read(slow)
    assert all(c.closed for c in pool.handed) and len(pool.handed) == 2


def test_server_limits_sit_inside_the_client_deadline() -> None:
    begin = Limits().begin(3.0)
    assert begin.startswith("BEGIN;")
    assert "statement_timeout = 2400" in begin and "lock_timeout = 1800" in begin
    assert "idle_in_transaction_session_timeout = 3000" in begin


def test_database_pool_max_defaults_to_4_and_must_be_a_positive_integer() -> None:
    assert load_settings({"MARKING_QUEUE_SECRET": SECRET}).database_pool_max == 4
    assert load_settings({"MARKING_QUEUE_SECRET": SECRET,
                          "DATABASE_POOL_MAX": "2"}).database_pool_max == 2
    for bad in ("0", "two", "-3"):
        with pytest.raises(SettingsError, match="DATABASE_POOL_MAX"):
            load_settings({"MARKING_QUEUE_SECRET": SECRET, "DATABASE_POOL_MAX": bad})
