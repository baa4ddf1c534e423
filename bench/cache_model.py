"""A model with a provider's prompt cache, and a queue driven through the Store to mark on it.

The emulator keeps the providers' cache rules (docs/prompt-cache.md): an entry per
prompt prefix (the payload, named by its cache key), alive for `ttl` from its
last use, readable only once the call that wrote it has begun its answer (30 %
of the call), writes billed at 1.25× and reads at 0.1× the input price.  Time
is scaled: a mark takes `mark` seconds.  The queue side is the Store's claim
and settle, as the webhook path drives them: a result's usage is billed by
aiqueue/queue/cache.py, its settle claims the next row, a step fills the free
slots, and a ticker steps every `tick` seconds (the in-process ticker's job).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import asyncpg

from aiqueue.db.store import Store
from aiqueue.models import Completed, Job
from aiqueue.settings import ModelPrice
from aiqueue.settings.kinds import DEFAULT_KIND, DEFAULT_POOL, Kind, Pool, QueueConfig, merged
from aiqueue.settings.money import Money
from aiqueue.settings.plan import ClaimPlan
from aiqueue.settings.prompt_cache import PromptCache

# Emulated prices per token: input 1, output 4; a cache write 1.25×, a read 0.1×.
PRICE = ModelPrice(1_000_000.0, 4_000_000.0)
WRITE, READ = 1.25, 0.10
THRESHOLD = 5


@dataclass
class Entry:
    readable_at: float
    expires_at: float


@dataclass
class Provider:
    """The model's prompt cache: prefix key -> entry, on the monotonic clock."""

    ttl: float
    mark: float
    entries: dict[str, Entry] = field(default_factory=dict)

    def begin(self, key: str, now: float) -> bool:
        """A call with prefix `key` starts: True when it reads the cached prefix."""
        entry = self.entries.get(key)
        if entry is not None and entry.readable_at <= now < entry.expires_at:
            entry.expires_at = now + self.ttl
            return True
        readable = now + 0.3 * self.mark
        if entry is not None and now < entry.expires_at:
            readable = min(readable, entry.readable_at)
        self.entries[key] = Entry(readable, now + self.ttl)
        return False


@dataclass
class Call:
    group: str
    started: float
    ended: float = 0.0
    read: bool = False
    billed_weight: float = 0.0


@dataclass
class Scenario:
    """Classes of `rows` answers sharing a `prefix`-token payload each, at in-flight `cap`."""

    classes: int
    rows: int
    cap: int
    ttl: float
    mark: float = 0.4
    prefix: int = 2000
    answer: int = 400
    feedback: int = 300
    # ttl_seconds for the queue: the provider's entry life, or 0 (today's order).
    queue_ttl: float | None = None
    progress: bool = True
    tick: float = 0.05


def queue_config(s: Scenario) -> QueueConfig:
    ttl = s.ttl if s.queue_ttl is None else s.queue_ttl
    pool = Pool(DEFAULT_POOL, s.cap, prices={"m": (PRICE.input, PRICE.output)},
                prompt_cache=PromptCache(ttl_seconds=ttl, write=WRITE, read=READ))
    return merged(None, pool, Kind(DEFAULT_KIND, DEFAULT_POOL))


@dataclass
class Run:
    store: Store
    s: Scenario
    calls: list[Call] = field(default_factory=list)
    of: dict[uuid.UUID, str] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    tasks: set[asyncio.Task[None]] = field(default_factory=set)
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    done: asyncio.Event = field(default_factory=asyncio.Event)
    finished: int = 0

    def __post_init__(self) -> None:
        self.config = queue_config(self.s)
        self.plan = ClaimPlan.build(self.config, THRESHOLD, 60.0,
                                    Money.of(self.config, 3600.0, 86400.0))
        self.cache = self.config.pools[DEFAULT_POOL].prompt_cache
        self.provider = Provider(self.s.ttl, self.s.mark)
        self.taker = uuid.uuid4()
        self.t0 = time.monotonic()

    async def enqueue(self, conn: asyncpg.Connection) -> None:
        for c in range(self.s.classes):
            group = f"class-{c:02d}"
            ids = [uuid.uuid4() for _ in range(self.s.rows)]
            await conn.executemany(
                "INSERT INTO submissions (id, assignment_id, content) VALUES ($1, $2, 'a')",
                [(i, group) for i in ids])
            payload = {"class": group, "rubric": "r" * (self.s.prefix * 4 - 40)}
            await self.store.enqueue(ids, group, 0, payload)
            self.of.update(dict.fromkeys(ids, group))
            self.order.append(group)

    async def step(self) -> None:
        """Claim until nothing more is claimable (the loop's step and its chain)."""
        async with self.lock:
            while True:
                job = await self.store.claim(self.plan)
                if job is None:
                    return
                self.start(job)
                if not job.more:
                    return

    def start(self, job: Job) -> None:
        task = asyncio.create_task(self.mark(job))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def mark(self, job: Job) -> None:
        now = time.monotonic()
        call = Call(self.of[job.submission_id], now - self.t0)
        self.calls.append(call)
        call.read = self.provider.begin(job.cache_key, now)
        await asyncio.sleep(0.3 * self.s.mark)
        if self.s.progress:
            await self.store.heartbeat(job.queue_id, job.dispatch_seq, {"current": 1})
        await asyncio.sleep(0.7 * self.s.mark)
        usage = self.usage(call.read)
        call.billed_weight = self.cache.billed(usage["prompt_tokens"], usage["cache_read_tokens"],
                                               usage["cache_write_tokens"]) + 2 * self.s.feedback
        call.ended = time.monotonic() - self.t0
        [(_, nxt)] = await self.store.settle(
            [Completed(job.queue_id, job.dispatch_seq, {"score": 1}, usage)], self.plan,
            self.taker)
        self.finished += 1
        if self.finished == self.s.classes * self.s.rows:
            self.done.set()
        if nxt is not None:
            self.start(nxt)
        await self.step()

    def usage(self, read: bool) -> dict[str, Any]:
        prefix = self.s.prefix
        return {"model": "m", "prompt_tokens": prefix + self.s.answer,
                "completion_tokens": self.s.feedback,
                "cache_read_tokens": prefix if read else 0,
                "cache_write_tokens": 0 if read else prefix}

    async def go(self) -> None:
        self.t0 = time.monotonic()
        ticker = asyncio.create_task(self._tick())
        try:
            await self.step()
            await asyncio.wait_for(self.done.wait(), timeout=600)
        finally:
            ticker.cancel()

    async def _tick(self) -> None:
        while True:
            await asyncio.sleep(self.s.tick)
            await self.step()


@dataclass(frozen=True)
class Figures:
    """What a run measured: the cache's hit rate, writes, cost, fairness and time."""

    hit_rate: float            # of every class's rows 2..n (by dispatch), the share that read
    min_class_hit_rate: float
    max_writes: int            # the most writes of one prefix
    cost_share: float          # cost / the same calls uncached
    shares: dict[str, float]   # billed weighted tokens while every class waits, per class
    last_mark: float           # seconds from the start to the last result
    start_lag: int             # the most places a class started after its enqueue place


def figures(run: Run) -> Figures:
    s = run.s
    by: dict[str, list[Call]] = defaultdict(list)
    for call in sorted(run.calls, key=lambda c: c.started):
        by[call.group].append(call)
    later = [c for calls in by.values() for c in calls[1:]]
    per_class = [sum(c.read for c in calls[1:]) / max(len(calls) - 1, 1)
                 for calls in by.values()]
    writes = max(sum(not c.read for c in calls) for calls in by.values())
    uncached = len(run.calls) * ((s.prefix + s.answer) * 1 + s.feedback * 4)
    cost = sum((s.answer + s.prefix * (READ if c.read else WRITE)) + s.feedback * 4
               for c in run.calls)
    # While every class still waits: the calls started before the first class's last one.
    until = min(calls[-1].started for calls in by.values())
    served: dict[str, float] = {g: 0.0 for g in by}
    for c in run.calls:
        if c.started < until:
            served[c.group] += c.billed_weight
    total = sum(served.values()) or 1.0
    starts = sorted(by, key=lambda g: by[g][0].started)
    lag = max(starts.index(g) - run.order.index(g) for g in by)
    return Figures(hit_rate=sum(c.read for c in later) / max(len(later), 1),
                   min_class_hit_rate=min(per_class), max_writes=writes,
                   cost_share=cost / uncached,
                   shares={g: v / total for g, v in served.items()},
                   last_mark=max(c.ended for c in run.calls), start_lag=lag)


async def measure(store: Store, conn: asyncpg.Connection, s: Scenario) -> Figures:
    """Enqueue the scenario's classes at once and mark them all; its figures."""
    run = Run(store, s)
    await run.enqueue(conn)
    await run.go()
    return figures(run)
