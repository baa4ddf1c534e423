"""The claim plan: what the claim needs of one configuration, as the one jsonb document
its SQL reads (db/sql/functions/10_plan.sql).  Built once per settings
(`Settings.claim_plan`); claim, settle, complete, can_claim and next_wakeup send it."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from aiqueue.settings.kinds import QueueConfig
from aiqueue.settings.money import Money


@dataclass(frozen=True)
class ClaimPlan:
    """Pools with their caps and budgets, kinds with theirs, the breaker's threshold, the
    budget window and the money (caps, prices), serialised once."""

    json: str

    @classmethod
    def build(cls, queue: QueueConfig, breaker_threshold: int, window_seconds: float,
              money: Money) -> ClaimPlan:
        return cls(_dumps({
            "pools": [{"name": p.name, "cap": p.max_in_flight, "tpm": p.tokens_per_minute,
                       "rpm": p.requests_per_minute, "budgeted": p.budget_declared,
                       "cache": p.prompt_cache.plan()}
                      for p in queue.pools.values()],
            "kinds": [{"name": k.name, "pool": k.pool, "cap": k.max_in_flight}
                      for k in queue.kinds.values()],
            "breaker_threshold": breaker_threshold,
            "window": window_seconds,
            "budgeted": any(p.budget_declared for p in queue.pools.values()),
            "money": money.doc(),
        }))

    def with_away(self, queue: QueueConfig, away: frozenset[str]) -> ClaimPlan:
        """This plan while the kinds `away` run on their fallbacks: each is listed in
        its fallback's pool, with the fallback's cap, which the two share (`runs_as`)."""
        if not away:
            return self
        found = self._away.get(away)
        if found is None:
            doc = json.loads(self.json)
            for entry in doc["kinds"]:
                kind = queue.kinds[entry["name"]]
                if kind.name in away and kind.fallback is not None:
                    other = queue.kinds[kind.fallback]
                    entry.update(pool=other.pool, cap=other.max_in_flight, runs_as=other.name)
            found = self._away[away] = ClaimPlan(_dumps(doc))
        return found

    @cached_property
    def _away(self) -> dict[frozenset[str], ClaimPlan]:
        return {}

    @cached_property
    def stalled(self) -> ClaimPlan:
        """This plan with every pool's cap at 1: "a row is due and none of its pool is out"."""
        doc = json.loads(self.json)
        for pool in doc["pools"]:
            pool["cap"] = 1
        return ClaimPlan(_dumps(doc))


def _dumps(doc: dict[str, Any]) -> str:
    return json.dumps(doc, separators=(",", ":"))
