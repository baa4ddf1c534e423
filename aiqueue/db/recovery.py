"""Recovering rows whose function went quiet: sql/recovery.sql's named queries, one method
each."""

from __future__ import annotations

from collections.abc import Sequence
from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models import Lookup


class RecoveryQueries(Gateway):
    """Stuck-row recovery and the platform looks that come before it (docs/guarantees.md)."""

    async def recover_stuck(self, stuck_after: float, max_attempts: int, *,
                            heartbeat: float | None = None, bound: float | None = None,
                            ask: bool = False, attempts: str | None = None,
                            kinds: Sequence[str] | None = None,
                            others: Sequence[str] = ()) -> int:
        """Recover quiet rows; `ask`: leave rows with an invocation id to the platform looks.

        `attempts`: the kinds' own max attempts ({kind: n} as JSON; QueueConfig.attempts).
        `kinds`: only rows of these kinds (None: of every kind but `others`).
        """
        heartbeat = stuck_after if heartbeat is None else heartbeat
        return int(await self._write_val(
            "recover_stuck", stuck_after, max_attempts, heartbeat, bound, ask, attempts or "{}",
            _kinds(kinds), list(others), idempotent=True))

    async def recent_processing_tail(self) -> float | None:
        """The p95 of the last hour's processing times (newest 200); None with none."""
        value = await self._fetchval("recent_processing_tail")
        return None if value is None else float(value)

    async def take_lookups(self, quiet: float, bound: float, limit: int, hold: float, *,
                           kinds: Sequence[str] | None = None,
                           others: Sequence[str] = ()) -> list[Lookup]:
        """Dispatches quiet for `quiet` seconds (or past `bound`), each taken for `hold` s;
        only rows of `kinds` (None: of every kind but `others`)."""
        # A repeat only takes what the first run left: at worst a look waits `hold`.
        rows = await self._write("take_lookups", quiet, quiet, bound, limit, hold,
                                 _kinds(kinds), list(others), idempotent=True)
        return [Lookup.from_row(r) for r in rows]

    async def platform_waits(self, queue_id: UUID, dispatch_seq: int, said: str,
                             again_in: float, bound: float) -> None:
        """Note "not finished yet" (or "could not tell") and when to ask again."""
        await self._write_one("platform_waits", queue_id, dispatch_seq, said, again_in, bound)

    async def platform_said(self, queue_id: UUID, dispatch_seq: int, said: str) -> None:
        """Note the platform's word on a dispatch that has just ended."""
        await self._write_one("platform_said", queue_id, dispatch_seq, said)


def _kinds(kinds: Sequence[str] | None) -> list[str] | None:
    return None if kinds is None else list(kinds)
