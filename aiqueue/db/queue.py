"""The loop's statements of sql/queue.sql: claim, settle, fail, wake up."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models import Completed, Job, Status
from aiqueue.settings.plan import ClaimPlan


class QueueQueries(Gateway):
    """The loop's writes (the LoopStore port, aiqueue/ports.py): one method per named query."""

    # `plan`: the claim plan (Settings.claim_plan, settings/plan.py), built once per settings.

    async def claim(self, plan: ClaimPlan) -> Job | None:
        rows = await self._write("claim", plan.json)
        return Job.from_row(rows[0]) if rows else None

    async def can_claim(self, plan: ClaimPlan) -> bool:
        return bool(await self._fetchval("can_claim", plan.json))

    async def dispatch_accepted(self, pool: str = "default") -> None:
        await self._write_one("dispatch_accepted", pool)

    async def refused(self, queue_id: UUID, dispatch_seq: int, *, kind: str, delay: float,
                      give_up: float, cap: int, plan: str | None = None,
                      window: float | None = None) -> Status | None:
        """A refusal of the current dispatch (docs/concepts.md); the row's new status, or None.

        `kind` is the refusal's (rate_limited, overloaded); only the row's pool is held.
        `window`: the model's window the refusal tells (flow.learned_window), if any.
        """
        # Only the current dispatch can be refused, so a repeat changes nothing.
        status: Status | None = await self._write_val(
            "refused", queue_id, dispatch_seq, kind, delay, give_up, cap, plan, window,
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

    async def set_dispatch_ref(self, queue_id: UUID, dispatch_seq: int, ref: str) -> None:
        # Idempotent: the same id written again changes nothing.
        await self._write_one("set_dispatch_ref", queue_id, dispatch_seq, ref)

    async def cache_key(self, queue_id: UUID, key_rpm: int) -> str:
        """The row's cache key, sharded by its prefix's dispatches this minute."""
        return str(await self._fetchval("cache_key", queue_id, key_rpm))

    async def breaker_failure(self, threshold: int, cooldown: float,
                              pool: str = "default") -> int:
        rows = await self._write("breaker_failure", threshold, cooldown, pool)
        return int(rows[0]["consecutive_failures"]) if rows else 0

    async def complete(self, item: Completed, plan: ClaimPlan) -> bool:
        """Apply a result at most once; it raises its pool's L and corrects the budget
        window and the dispatch's charge (turns by tokens, spend)."""
        rows = await self._write_one("complete", *item.args(), plan.json)
        return bool(rows and rows[0][0])

    async def settle(self, items: Sequence[Completed], plan: ClaimPlan,
                     taker: UUID) -> list[tuple[bool, Job | None]]:
        """Each item's complete, then a claim, in one statement: per item, whether it was
        applied and the job claimed for it, taken by `taker` to send (the caller keeps
        its token across its retries: a repeat whose first answer was lost gets the
        same jobs back, docs/deploying/index.md)."""
        # A repeat applies nothing twice (the status check) and claims under the cap.
        rows = await self._write_one("settle", Completed.items_json(items), plan.json, taker)
        # aiqueue_settle_many answers one row per item, in order
        return [(bool(r["applied"]), Job.from_row(r) if r["queue_id"] else None) for r in rows]

    async def heartbeat(self, queue_id: UUID, dispatch_seq: int, progress: Any) -> bool:
        rows = await self._write_one("heartbeat", queue_id, dispatch_seq, json.dumps(progress))
        return bool(rows)

    async def prune(self, older_than_seconds: float) -> int:
        if not await self._fetchval("prune_due"):
            return 0
        return int(await self._write_val("prune", older_than_seconds, idempotent=True))

    async def next_wakeup(self, plan: ClaimPlan, stuck_after: float, *,
                          heartbeat: float | None = None, bound: float | None = None,
                          ask: bool = False, look: float | None = None) -> float | None:
        """Seconds until the step has work; `look`: how long a dispatch the platform
        is asked about stays quiet before the look (default: the heartbeat timeout)."""
        heartbeat = stuck_after if heartbeat is None else heartbeat
        look = min(stuck_after, heartbeat) if look is None else look
        value = await self._fetchval("next_wakeup", plan.json, stuck_after, heartbeat,
                                     bound, ask, look)
        return None if value is None else float(value)
