"""A shared model driven through the Store: groups whose rows use known tokens."""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field

import asyncpg

from aiqueue.db.store import Store
from aiqueue.models import Completed, Job
from aiqueue.settings.kinds import QueueConfig
from aiqueue.settings.money import NO_MONEY, Money
from tests.conftest import add_submissions, enqueued
from tests.plans import plan_of

THRESHOLD = 5


@dataclass
class Model:
    """Rows of each group use `size[group]` tokens (4/5 prompt, 1/5 completion)."""

    store: Store
    conn: asyncpg.Connection
    size: dict[str, int] = field(default_factory=dict)
    of: dict[uuid.UUID, str] = field(default_factory=dict)
    tokens: Counter[str] = field(default_factory=Counter)
    rows: Counter[str] = field(default_factory=Counter)
    # What a token of each group's rows costs in USD (absent: the usage names no cost).
    usd_per_token: dict[str, float] = field(default_factory=dict)
    report_usage: bool = True
    money: Money = NO_MONEY
    in_flight: list[Job] = field(default_factory=list)
    # The largest gap, in weighted tokens (input + 2 x output), between two groups'
    # service after each completion (run_while_both_wait).
    max_gap: float = 0.0
    # The pools and kinds (None: the default pool with the cap `fill` is given).
    plan: QueueConfig | None = None

    async def enqueue(self, group: str, n: int, size: int, assignment: str | None = None,
                      payload: dict[str, object] | None = None) -> None:
        assignment = assignment or group
        ids = await add_submissions(self.conn, n, assignment_id=assignment)
        out = enqueued(await self.store.enqueue(ids, assignment, 0, payload or {}, group=group))
        assert len(out.queue_ids) == n
        self.size[group] = size
        self.of.update(dict.fromkeys(ids, group))

    def usage(self, group: str) -> dict[str, object] | None:
        if not self.report_usage:
            return None
        size = self.size[group]
        usage: dict[str, object] = {"model": "m", "prompt_tokens": size * 4 // 5,
                                    "completion_tokens": size - size * 4 // 5}
        if group in self.usd_per_token:
            usage["cost_usd"] = size * self.usd_per_token[group]
        return usage

    async def fill(self, cap: int) -> None:
        """Claim until `cap` rows are out or nothing more is claimable."""
        while len(self.in_flight) < cap:
            job = await self.store.claim(plan_of(cap, THRESHOLD, plan=self.plan,
                                                 money=self.money))
            if job is None:
                return
            self.in_flight.append(job)

    async def finish_one(self) -> str:
        """Complete the oldest row out; its group."""
        job = self.in_flight.pop(0)
        group = self.of[job.submission_id]
        assert await self.store.complete(Completed(job.queue_id, job.dispatch_seq, {"score": 1},
                                                   self.usage(group)),
                                         plan_of(plan=self.plan, money=self.money))
        self.tokens[group] += self.size[group]
        self.rows[group] += 1
        return group

    async def run_while_both_wait(self, a: str, b: str, left: dict[str, int], cap: int) -> None:
        """Serve with `cap` in flight until one of two backlogged groups has no row left."""
        while left[a] > 0 and left[b] > 0:
            await self.fill(cap)
            group = await self.finish_one()
            left[group] -= 1
            gap = abs(self.weighted(a) - self.weighted(b))
            self.max_gap = max(self.max_gap, gap)

    def weighted(self, group: str) -> float:
        """The group's service so far as VTC counts it (4/5 input, 1/5 output, x2)."""
        size = self.size[group]
        return self.rows[group] * (size * 4 // 5 + 2 * (size - size * 4 // 5))

    def share(self, group: str) -> float:
        return self.tokens[group] / sum(self.tokens.values())
