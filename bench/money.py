"""A shared model's money (docs/concepts.md): token shares under row turns and under
turns by tokens (VTC), and the spend of a capped group over its windows against its cap.

Driven through the Store against a fresh database, as a model would answer: each
group's rows use a fixed number of tokens (4/5 prompt, 1/5 completion), reported
in the result's usage; `L` rows are in flight, the oldest finishes first.
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass, field

import asyncpg

from aiqueue.db.store import Store, connect_pool
from aiqueue.models import Completed, Job
from aiqueue.settings import ModelPrice
from aiqueue.settings.money import NO_MONEY, Money, PoolMoney
from bench.common import fresh_database
from tests.plans import plan_of

IN_FLIGHT = 4


@dataclass
class _Model:
    store: Store
    conn: asyncpg.Connection
    report_tokens: bool = True
    usd_per_token: dict[str, float] = field(default_factory=dict)
    money: Money = NO_MONEY
    size: dict[str, int] = field(default_factory=dict)
    of: dict[uuid.UUID, str] = field(default_factory=dict)
    tokens: Counter[str] = field(default_factory=Counter)
    out: list[Job] = field(default_factory=list)

    async def enqueue(self, group: str, n: int, size: int) -> None:
        ids = [uuid.uuid4() for _ in range(n)]
        await self.conn.executemany(
            "INSERT INTO submissions (id, assignment_id, content) VALUES ($1, $2, 'answer')",
            [(i, group) for i in ids])
        await self.store.enqueue(ids, group, 0, {})
        self.size[group] = size
        self.of.update(dict.fromkeys(ids, group))

    async def step(self) -> str | None:
        """Fill the slots, then finish the oldest row out; its group (None: nothing out)."""
        while len(self.out) < IN_FLIGHT:
            job = await self.store.claim(plan_of(IN_FLIGHT, 5, money=self.money))
            if job is None:
                break
            self.out.append(job)
        if not self.out:
            return None
        job = self.out.pop(0)
        group, size = self.of[job.submission_id], self.size[self.of[job.submission_id]]
        usage: dict[str, object] = {"model": "m"}
        if self.report_tokens:
            usage.update(prompt_tokens=size * 4 // 5, completion_tokens=size - size * 4 // 5)
        if group in self.usd_per_token:
            usage["cost_usd"] = size * self.usd_per_token[group]
        await self.store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1}, usage),
                                  plan_of(money=self.money))
        self.tokens[group] += size
        return group


async def _model(name: str) -> tuple[_Model, Store, asyncpg.Connection]:
    dsn = await fresh_database(name)
    store = Store(await connect_pool(dsn, max_size=2))
    conn = await asyncpg.connect(dsn)
    return _Model(store, conn), store, conn


async def token_share(vtc: bool, name: str) -> float:
    """The essays' share of the tokens while 4,000-token essays and 400-token answers both
    wait.  Row turns: nothing reports tokens, so every row is charged alike."""
    model, store, conn = await _model(name)
    try:
        model.report_tokens = vtc
        await model.enqueue("essays", 100, 4000)
        await model.enqueue("short", 1000, 400)
        left = {"essays": 100, "short": 1000}
        while left["essays"] > 0 and left["short"] > 0:
            group = await model.step()
            assert group is not None
            left[group] -= 1
        return model.tokens["essays"] / sum(model.tokens.values())
    finally:
        await conn.close()
        await store.close()


@dataclass(frozen=True)
class CappedRun:
    cap: float
    bound: float  # the cap plus L × the largest row's cost
    spent: list[float]  # the capped group's spend in each window it used
    failed: int
    other_rows: int


async def capped_spend(name: str, window: float = 2.0, cap: float = 5.0) -> CappedRun:
    """A group capped at `cap` per window ($1 a row) beside one whose rows (as long) cost
    $0.01 and so never reach the cap."""
    model, store, conn = await _model(name)
    try:
        pool = PoolMoney(caps={"group_usd_per_hour": cap}, prices={"m": ModelPrice(1.0, 1.0)})
        model.money = Money({"default": pool}, hour_seconds=window)
        model.usd_per_token = {"teacher": 1 / 1000, "other": 1 / 100_000}
        await model.enqueue("teacher", 60, 1000)
        await model.enqueue("other", 3000, 1000)
        loop = asyncio.get_running_loop()
        start = loop.time()
        while loop.time() - start < 4 * window:
            if await model.step() is None:
                await asyncio.sleep(0.02)
        rows = await conn.fetch(
            "SELECT usd FROM ai_marking_spend WHERE group_key = 'teacher' AND span = 'hour' "
            "ORDER BY starts_at")
        failed = await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE status = 'failed'")
        other = await conn.fetchval(
            "SELECT count(*) FROM ai_marking_queue WHERE assignment_id = 'other' "
            "AND status = 'completed'")
        return CappedRun(cap, cap + IN_FLIGHT * 1.0, [float(r["usd"]) for r in rows],
                         int(failed), int(other))
    finally:
        await conn.close()
        await store.close()
