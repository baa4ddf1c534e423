"""The loop's statements of sql/queue.sql: claim, settle, fail, wake up."""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.flow import NO_BUDGET, Budget
from aiqueue.models import Job, Status
from aiqueue.settings.money import NO_MONEY, Money


def _budgeted(plan: str | None) -> bool:
    """Whether a plan's pools declare a budget (the result then corrects the window)."""
    return plan is not None and any(
        p["tpm"] > 0 or p["rpm"] > 0 for p in json.loads(plan)["pools"])


class QueueQueries(Gateway):
    """The loop's writes (the LoopStore port, aiqueue/ports.py): one method per named query."""

    # `plan` (the pools and kinds, aiqueue/settings/kinds.py QueueConfig.plan): None means
    # the default pool with the cap and budget passed, and the one kind `mark`.

    async def claim(self, cap: int, breaker_threshold: int,
                    budget: Budget = NO_BUDGET, plan: str | None = None,
                    money: Money = NO_MONEY) -> Job | None:
        rows = await self._write("claim", cap, breaker_threshold, *budget.args(), plan,
                                 money.json())
        return Job.from_row(rows[0]) if rows else None

    async def can_claim(self, cap: int, breaker_threshold: int, plan: str | None = None) -> bool:
        return bool(await self._fetchval("can_claim", cap, breaker_threshold, plan))

    async def dispatch_accepted(self, pool: str = "default") -> None:
        await self._write_one("dispatch_accepted", pool)

    async def refused(self, queue_id: UUID, dispatch_seq: int, *, kind: str, delay: float,
                      give_up: float, cap: int, plan: str | None = None) -> Status | None:
        """A refusal of the current dispatch (CONTRACT §8a); the row's new status, or None.

        `kind` is the refusal's (rate_limited, overloaded); only the row's pool is held.
        """
        # Only the current dispatch can be refused, so a repeat changes nothing.
        status: Status | None = await self._write_val(
            "refused", queue_id, dispatch_seq, kind, delay, give_up, cap, plan,
            idempotent=True)
        return status

    async def attempt_failed(
        self,
        queue_id: UUID,
        dispatch_seq: int,
        *,
        delay: float,
        retryable: bool,
        max_attempts: int,
        error: str,
        outcome: str,
        attempts: str | None = None,
    ) -> Status | None:
        """Fail the current dispatch; the row's new status, or None if it was stale.

        `attempts`: the kinds' own max attempts ({kind: n} as JSON; QueueConfig.attempts).
        """
        # Only the row's current dispatch can fail it, so a repeat changes nothing.
        status: Status | None = await self._write_val(
            "attempt_failed", queue_id, dispatch_seq, delay, retryable, max_attempts, error,
            outcome, attempts or "{}", idempotent=True,
        )
        return status

    async def take_handoff(self, queue_id: UUID, dispatch_seq: int) -> bool:
        """Take a row a settle claimed, to send it: False when another taker had it."""
        # One statement on the hot path.  Its retry after a lost answer reads as
        # taken: the row then waits for recovery rather than risk two dispatches.
        rows = await self._write_one("take_handoff", queue_id, dispatch_seq)
        return bool(rows and rows[0][0])

    async def set_dispatch_ref(self, queue_id: UUID, dispatch_seq: int, ref: str) -> None:
        # Idempotent: the same id written again changes nothing.
        await self._write_one("set_dispatch_ref", queue_id, dispatch_seq, ref)

    async def breaker_failure(self, threshold: int, cooldown: float,
                              pool: str = "default") -> int:
        rows = await self._write("breaker_failure", threshold, cooldown, pool)
        return int(rows[0]["consecutive_failures"]) if rows else 0

    async def complete(
        self, queue_id: UUID, dispatch_seq: int, result: dict[str, Any], usage: Any,
        cap: int = 0, budget: Budget = NO_BUDGET, plan: str | None = None,
        money: Money = NO_MONEY,
    ) -> bool:
        """Apply a result at most once; it raises L (up to `cap`) and corrects the budget
        and the dispatch's charge (turns by tokens, spend)."""
        usage_json = json.dumps(usage) if usage is not None else None
        rows = await self._write_one("complete", queue_id, json.dumps(result), usage_json,
                                     dispatch_seq, cap, budget.declared or _budgeted(plan),
                                     plan, money.json())
        return bool(rows and rows[0][0])

    async def settle(
        self, queue_id: UUID, dispatch_seq: int, result: dict[str, Any], usage: Any, cap: int,
        breaker_threshold: int, budget: Budget = NO_BUDGET, plan: str | None = None,
        money: Money = NO_MONEY,
    ) -> tuple[bool, Job | None]:
        """complete, then claim: whether the result was applied, and the job claimed next."""
        usage_json = json.dumps(usage) if usage is not None else None
        # A repeat applies nothing twice (the status check) and claims under the cap.
        rows = await self._write_one("settle", queue_id, json.dumps(result), usage_json,
                                     dispatch_seq, cap, breaker_threshold, *budget.args(),
                                     plan, money.json())
        row = rows[0]  # aiqueue_settle always answers one row
        return bool(row["applied"]), Job.from_row(row) if row["queue_id"] else None

    async def heartbeat(self, queue_id: UUID, dispatch_seq: int, progress: Any) -> bool:
        rows = await self._write_one("heartbeat", queue_id, dispatch_seq, json.dumps(progress))
        return bool(rows)

    async def prune(self, older_than_seconds: float) -> int:
        return int(await self._write_val("prune", older_than_seconds, idempotent=True))

    async def next_wakeup(self, cap: int, threshold: int, stuck_after: float, *,
                          heartbeat: float | None = None, bound: float | None = None,
                          ask: bool = False, look: float | None = None,
                          budget: Budget = NO_BUDGET,
                          plan: str | None = None) -> float | None:
        """Seconds until the step has work; `look`: how long a dispatch the platform
        is asked about stays quiet before the look (default: the heartbeat timeout)."""
        heartbeat = stuck_after if heartbeat is None else heartbeat
        look = min(stuck_after, heartbeat) if look is None else look
        value = await self._fetchval("next_wakeup", cap, threshold, stuck_after, heartbeat,
                                     bound, ask, *budget.args(), plan, look)
        return None if value is None else float(value)
