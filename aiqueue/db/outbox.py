"""The notification outbox: one method per named query of sql/outbox.sql."""

from __future__ import annotations

from uuid import UUID

from aiqueue.db.gateway import Gateway
from aiqueue.models import Delivery, DeliveryState, OutboxEntry


class OutboxQueries(Gateway):
    """Claim due events, record each attempt's outcome, prune, list for the panel."""

    async def claim_deliveries(self, limit: int, lease_seconds: float) -> list[Delivery]:
        # One autocommit statement (one round trip: this runs after most steps).
        # Repeated after a lost answer it claims again; what the lost claim took
        # stays leased until its lease runs out and is then due again: late, not lost.
        rows = await self._write_one("claim_deliveries", limit, lease_seconds)
        return [Delivery.from_row(r) for r in rows]

    async def delivery_succeeded(self, event_id: UUID, outcome: str) -> bool:
        return bool(await self._write_one("delivery_succeeded", event_id, outcome))

    async def delivery_failed(self, event_id: UUID, attempt: int, outcome: str, *,
                              delay: float, window: float, stop: bool) -> DeliveryState | None:
        """Reschedule or give up; the new state, or None if a newer claim owns the event."""
        # Idempotent: a repeat finds the same claim and sets the same outcome.
        rows = await self._write_one("delivery_failed", event_id, attempt, outcome, delay, window,
                                     stop)
        state: DeliveryState | None = rows[0]["state"] if rows else None
        return state

    async def prune_outbox(self, keep_seconds: float, window: float) -> int:
        return len(await self._write("prune_outbox", keep_seconds, window, idempotent=True))

    async def next_delivery_due(self) -> float | None:
        value = await self._fetchval("next_delivery_due")
        return None if value is None else float(value)

    async def outbox_entries(self, limit: int) -> list[OutboxEntry]:
        return [OutboxEntry.from_row(r) for r in await self._fetch("outbox_entries", limit,
                                                                   page=True)]
