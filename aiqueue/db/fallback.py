"""Ordered fallback (CONTRACT §10e): one method per named query of sql/fallback.sql."""

from __future__ import annotations

from collections.abc import Sequence

from aiqueue.db.gateway import Gateway


class FallbackQueries(Gateway):
    """Whether pools are down, and moving a kind's pending rows to its fallback and back."""

    async def pools_down(self, pools: Sequence[str]
                         ) -> dict[str, tuple[bool, bool, float | None]]:
        """{pool: (circuit open, held by a refusal, seconds every call was refused)}."""
        rows = await self._fetch("pools_down", list(pools))
        return {r["pool"]: (r["circuit_open"], r["held"],
                            None if r["refusing_seconds"] is None
                            else float(r["refusing_seconds"])) for r in rows}

    async def fallback_move(self, moves: str) -> int:
        """Move pending rows per `moves` (jsonb text); how many moved."""
        return int(await self._write_val("fallback_move", moves, idempotent=True) or 0)
