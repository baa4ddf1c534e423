"""Claim plans for tests that call the store directly: the default pool with a cap, a
budget and a breaker threshold, or a configuration's pools and kinds (ClaimPlan.build)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from aiqueue.db.store import Store
from aiqueue.models import Completed, Job
from aiqueue.settings.kinds import DEFAULT_KIND, DEFAULT_POOL, Kind, Pool, QueueConfig
from aiqueue.settings.money import NO_MONEY, Money
from aiqueue.settings.plan import ClaimPlan


@dataclass(frozen=True)
class Budget:
    """The default pool's declared budget (0 = none), held over any `window_seconds`."""

    tokens_per_minute: int = 0
    requests_per_minute: int = 0
    window_seconds: float = 60.0


NO_BUDGET = Budget()


def plan_of(cap: int = 0, threshold: int = 5, budget: Budget = NO_BUDGET, *,
            plan: QueueConfig | str | None = None, money: Money = NO_MONEY) -> ClaimPlan:
    """The claim plan of one pool `default` (cap, budget) with the kind `mark`, or of
    `plan`'s pools and kinds (a QueueConfig, or its pools-and-kinds JSON)."""
    if isinstance(plan, str):
        plan = _queue(json.loads(plan))
    queue = plan or QueueConfig(
        {DEFAULT_POOL: Pool(DEFAULT_POOL, cap, budget.tokens_per_minute,
                            budget.requests_per_minute)},
        {DEFAULT_KIND: Kind(DEFAULT_KIND, DEFAULT_POOL)})
    return ClaimPlan.build(queue, threshold, budget.window_seconds, money)


def _queue(doc: dict[str, list[dict[str, object]]]) -> QueueConfig:
    pools = {str(p["name"]): Pool(str(p["name"]), int(str(p.get("cap") or 0)),
                                  int(str(p.get("tpm") or 0)), int(str(p.get("rpm") or 0)))
             for p in doc["pools"]}
    kinds = {str(k["name"]): Kind(str(k["name"]), str(k["pool"]),
                                  max_in_flight=int(str(k.get("cap") or 0)))
             for k in doc["kinds"]}
    return QueueConfig(pools, kinds)


# One caller's token for the hand-offs of its settles: its repeats get back what
# its first settle claimed (docs/deploying/index.md).
TAKER = uuid.UUID(int=1)


async def settle_one(store: Store, item: Completed, plan: ClaimPlan,
                     taker: uuid.UUID = TAKER) -> tuple[bool, Job | None]:
    """One result's settle (Store.settle of one item): applied, and the job claimed."""
    [outcome] = await store.settle([item], plan, taker)
    return outcome
