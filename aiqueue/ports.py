"""What the queue's loop needs of its store, as a Protocol.

The real store (aiqueue/db/store.py) satisfies it, and so does the unit
tests' in-memory fake (tests/unit/fakes.py); mypy checks both.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol
from uuid import UUID

from aiqueue.flow import NO_BUDGET, Budget
from aiqueue.models import Job, Status
from aiqueue.models.records import Retained
from aiqueue.money import NO_MONEY, Money


class LoopStore(Protocol):
    """Claim, settle and fail rows; keep the breaker; recover and prune."""

    async def recover_stuck(self, stuck_after: float, max_attempts: int, *,
                            heartbeat: float | None = None, bound: float | None = None,
                            ask: bool = False, attempts: str | None = None) -> int: ...

    async def prune(self, older_than_seconds: float) -> int: ...

    async def retain(self, ended_seconds: float, history_seconds: float, *,
                     batch: int = 5000, every_seconds: float = 60.0) -> Retained: ...

    async def expire_rows(self) -> int: ...

    async def evaluate_alerts(self, *, backlog: float, stalled: float, failures_min: int,
                              failure_rate: float, at: datetime | None = None
                              ) -> list[tuple[str, str]]: ...

    async def claim(self, cap: int, breaker_threshold: int,
                    budget: Budget = NO_BUDGET, plan: str | None = None,
                    money: Money = NO_MONEY) -> Job | None: ...

    async def can_claim(self, cap: int, breaker_threshold: int,
                        plan: str | None = None) -> bool: ...

    async def dispatch_accepted(self, pool: str = "default") -> None: ...

    async def refused(self, queue_id: UUID, dispatch_seq: int, *, kind: str, delay: float,
                      give_up: float, cap: int, plan: str | None = None) -> Status | None: ...

    async def attempt_failed(
        self, queue_id: UUID, dispatch_seq: int, *, delay: float, retryable: bool,
        max_attempts: int, error: str, outcome: str, attempts: str | None = None,
    ) -> Status | None: ...

    async def take_handoff(self, queue_id: UUID, dispatch_seq: int) -> bool: ...

    async def set_dispatch_ref(self, queue_id: UUID, dispatch_seq: int, ref: str) -> None: ...

    async def breaker_failure(self, threshold: int, cooldown: float,
                              pool: str = "default") -> int: ...

    async def complete(
        self, queue_id: UUID, dispatch_seq: int, result: dict[str, Any], usage: Any,
        cap: int = 0, budget: Budget = NO_BUDGET, plan: str | None = None,
        money: Money = NO_MONEY,
    ) -> bool: ...

    async def settle(
        self, queue_id: UUID, dispatch_seq: int, result: dict[str, Any], usage: Any, cap: int,
        breaker_threshold: int, budget: Budget = NO_BUDGET, plan: str | None = None,
        money: Money = NO_MONEY,
    ) -> tuple[bool, Job | None]: ...
